"""`cardhour volumes create|list|show|delete`: persistent volumes that outlive instances
(`cardhour launch --volume NAME:/path` mounts one)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from cardhour.api.schemas import VolumeRead
from cardhour.cli.common import JsonOption, KeyOption, UrlOption, connect, out, print_json


def _where(row: VolumeRead) -> str:
    if row.state == "attached":
        return f"attached at {row.mount_path} ({row.instance_id})"
    return row.state


def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Its name: lowercase letters, digits and '-'.")],
    size: Annotated[
        str, typer.Option("--size", help="Whole GiB: 100G, 100GiB or 2T (1 T = 1,024 G).")
    ],
    dc: Annotated[str, typer.Option("--dc", help="The data centre it lives in, e.g. bj1.")],
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Create an empty volume, billed per GB-hour until you delete it."""
    with connect(ctx, url, api_key) as client:
        row = client.create_volume(name, size, dc)
    if as_json:
        print_json(row)
        return
    out.print(
        f"created volume {escape(row.name)}: {row.size_gb} GiB in {escape(row.data_centre)}, "
        f"{row.hourly} {row.currency} per hour ({row.price_per_gb_hour} per GB-hour); mount it "
        f"with `cardhour launch … --volume {escape(row.name)}:/data`",
        soft_wrap=True,
    )


def list_volumes(
    ctx: typer.Context,
    all: Annotated[bool, typer.Option("--all", help="Deleted volumes too.")] = False,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """List your volumes: size, data centre, where attached, what they cost and were charged."""
    with connect(ctx, url, api_key) as client:
        rows = client.volumes(all=all)
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print("no volumes: create one with `cardhour volumes create data --size 100G --dc bj1`")
        return
    table = Table("name", "size", "dc", "state", "per hour", "charged", "created")
    for row in rows:
        table.add_row(
            escape(row.name),
            f"{row.size_gb} GiB",
            escape(row.data_centre),
            escape(_where(row)),
            f"{row.hourly} {row.currency}",
            row.charged,
            f"{row.created_at:%Y-%m-%d %H:%M}",
        )
    out.print(table)


def show(
    ctx: typer.Context,
    volume: Annotated[str, typer.Argument(help="The volume's name or id.")],
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """One volume in full, with its events."""
    with connect(ctx, url, api_key) as client:
        row = client.get_volume(volume)
    if as_json:
        print_json(row)
        return
    for key, value in (
        ("name", row.name),
        ("id", row.id),
        ("size", f"{row.size_gb} GiB"),
        ("data centre", row.data_centre),
        ("state", _where(row)),
        ("host", row.host or "none yet (made on the first host that runs it)"),
        ("storage", "the data centre's shared storage" if row.shared else "its host's disk"),
        ("price", f"{row.price_per_gb_hour} {row.currency} per GB-hour ({row.hourly} per hour)"),
        ("charged", f"{row.charged} {row.currency}"),
        ("created", f"{row.created_at:%Y-%m-%d %H:%M:%S} UTC"),
    ):
        out.print(f"{key}: {escape(str(value))}", soft_wrap=True)
    if row.overdue_since is not None:
        out.print(
            f"[red]your balance ran out at {row.overdue_since:%Y-%m-%d %H:%M} UTC: top up or it "
            "is deleted when the retention period ends[/]",
            soft_wrap=True,
        )
    for e in row.events:
        out.print(
            f"  {e.at:%Y-%m-%d %H:%M:%S}  {escape(e.kind)}: {escape(e.message)}", soft_wrap=True
        )


def delete(
    ctx: typer.Context,
    volume: Annotated[str, typer.Argument(help="The volume's name or id.")],
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Delete a volume and its data (refused while an instance has it attached). Billing ends
    now."""
    with connect(ctx, url, api_key) as client:
        row = client.delete_volume(volume)
    if as_json:
        print_json(row)
        return
    said = "deleted" if row.state == "deleted" else "deleting: its host removes the data"
    out.print(f"volume {escape(row.name)} {said}; charged {row.charged} {row.currency} in all")
