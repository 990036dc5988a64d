"""`cardhour admin hosts add|list|remove`: an operator puts GPU servers into service."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from cardhour.api.schemas.hosts import HostCreate, HostRead
from cardhour.cli.common import JsonOption, KeyOption, UrlOption, connect, out, print_json


def add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The host's name: its node id in the fleet.")],
    dc: Annotated[str, typer.Option("--dc", help="Its data centre (an id in the fleet file).")],
    ib_leaf: Annotated[str | None, typer.Option("--ib-leaf", help="Its IB leaf switch.")] = None,
    ib_spine: Annotated[str | None, typer.Option("--ib-spine", help="The leaf's spine.")] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Enrol a server: prints a one-time join token and the command to run on the server."""
    body = HostCreate(name=name, data_centre=dc, ib_leaf=ib_leaf, ib_spine=ib_spine)
    with connect(ctx, url, api_key) as client:
        enrolled = client.admin_add_host(body)
    if as_json:
        print_json(enrolled)
        return
    out.print(
        f"host {escape(name)} enrolled in {escape(dc)}; the token works once, until "
        f"{enrolled.expires_at:%Y-%m-%d %H:%M} UTC. On the server, run:"
    )
    typer.echo(f"  {enrolled.command}")


def list_hosts(
    ctx: typer.Context,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Every host: state, GPUs, last heartbeat and containers."""
    with connect(ctx, url, api_key) as client:
        found = client.admin_hosts()
    if as_json:
        print_json(found)
        return
    out.print(_table(found))


def _table(hosts: list[HostRead]) -> Table:
    table = Table(box=None, header_style="bold")
    for column in ("HOST", "DC", "STATE", "GPUS", "ADDRESS", "RUNTIME", "CONTAINERS", "LAST SEEN"):
        table.add_column(column, no_wrap=True)
    for h in hosts:
        gpus = f"{h.gpu or '?'} ×{h.gpus}" if h.gpus else "-"
        if h.standin:
            gpus += " (stand-in)"
        state = h.state if h.lost_reason is None else f"{h.state}: {h.lost_reason}"
        seen = f"{h.last_seen_at:%H:%M:%S}" if h.last_seen_at else "-"
        table.add_row(
            escape(h.name),
            escape(h.data_centre),
            escape(state),
            escape(gpus),
            escape(h.address or "-"),
            escape(h.runtime or "-"),
            str(h.containers),
            seen,
        )
    return table


def remove(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The host to take out of service.")],
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Revoke the host's credential; instances on it are placed again elsewhere."""
    with connect(ctx, url, api_key) as client:
        host = client.admin_remove_host(name)
    if as_json:
        print_json(host)
        return
    out.print(f"host {escape(name)} removed: its agent is refused from now on")
