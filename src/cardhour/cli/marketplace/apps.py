"""`cardhour apps ...`: the AI app marketplace from the terminal (docs/dev/marketplace.md).

Callers: `list`, `show`, `call`. Developers: `publish` (a folder with `cardhour-app.yaml` and
its code), `submit`, `rollback`, `mine`, `earnings`, `payout`, `payouts`. Operators:
`cardhour admin app approve|reject|delist`.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from cardhour.api.schemas.marketplace import AppRead
from cardhour.cli.common import JsonOption, KeyOption, UrlOption, connect, out, print_json
from cardhour.core import apps as core_apps
from cardhour.core.errors import InvalidInput

SlugArgument = Annotated[str, typer.Argument(help="The app's slug (`cardhour apps list`).")]


def _table(rows: list[AppRead], developer: bool = False) -> None:
    table = Table(box=None, pad_edge=False)
    for head in ("SLUG", "NAME", "CATEGORY", "PRICE/CALL", "REPLICAS", "VERSION"):
        table.add_column(head)
    if developer:
        table.add_column("STATUS")
    for a in rows:
        cells = [a.slug, a.name, a.category, f"{a.price_per_call} {a.currency}",
                 str(a.replicas), str(a.version)]  # fmt: skip
        if developer:
            cells.append(a.status + (f" ({a.status_reason})" if a.status_reason else ""))
        table.add_row(*(escape(c) for c in cells))
    out.print(table)


def list_apps(
    ctx: typer.Context,
    category: Annotated[
        str | None, typer.Option("--category", help="Only this category (e.g. rag, speech).")
    ] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """The marketplace's listed apps, by category, with their price per call."""
    with connect(ctx, url, api_key) as client:
        rows = client.apps(category)
    if as_json:
        print_json(rows)
    elif rows:
        _table(rows)
    else:
        out.print("no apps listed" + (f" in {escape(category)}" if category else ""))


def mine(
    ctx: typer.Context,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Your apps as their developer: every status, the current version."""
    with connect(ctx, url, api_key) as client:
        rows = client.my_apps()
    if as_json:
        print_json(rows)
    elif rows:
        _table(rows, developer=True)
    else:
        out.print("you have no apps: publish one with `cardhour apps publish DIR`")


def show(
    ctx: typer.Context,
    slug: SlugArgument,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """One listed app: description, price per call, version, replicas, input schema."""
    with connect(ctx, url, api_key) as client:
        a = client.app(slug)
    if as_json:
        print_json(a)
        return
    out.print(f"[bold]{escape(a.name)}[/bold] ({escape(a.slug)}, {escape(a.category)})")
    out.print(escape(a.description), soft_wrap=True)
    out.print(f"price     {a.price_per_call} {a.currency} per call")
    out.print(f"version   {a.version}, replicas now {a.replicas}")
    out.print("input     " + escape(json.dumps(a.input_schema, ensure_ascii=False)), soft_wrap=True)


def _payload(value: str | None) -> dict[str, Any]:
    if value is None or value == "-":
        text = sys.stdin.read()
    elif value.startswith("@"):
        try:
            text = Path(value[1:]).expanduser().read_text()
        except OSError as exc:
            raise InvalidInput(f"cannot read {value[1:]!r}: {exc.strerror}") from None
    else:
        text = value
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"the input is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise InvalidInput("the input must be a JSON object")
    return payload


def _attach(payload: dict[str, Any], files: list[str]) -> dict[str, Any]:
    """`FIELD=PATH` pairs: each file's bytes, base64-encoded, in the input's FIELD."""
    for pair in files:
        field, sep, path = pair.partition("=")
        if not sep or not field or not path:
            raise InvalidInput(f"--file {pair!r}: FIELD=PATH, e.g. image_b64=shot.png")
        try:
            payload[field] = base64.b64encode(Path(path).expanduser().read_bytes()).decode()
        except OSError as exc:
            raise InvalidInput(f"cannot read {path!r}: {exc.strerror}") from None
    return payload


def call(
    ctx: typer.Context,
    slug: SlugArgument,
    payload: Annotated[
        str | None,
        typer.Argument(
            help="The input: JSON, @FILE, or '-' for standard input (the default; '{}' "
            "with --file)."
        ),
    ] = None,
    files: Annotated[
        list[str] | None,
        typer.Option(
            "--file",
            help="FIELD=PATH: the file, base64-encoded, as the input's FIELD "
            "(e.g. --file image_b64=screenshot.png); repeatable.",
        ),
    ] = None,
    call_id: Annotated[
        str | None,
        typer.Option("--call-id", help="Idempotency key: the same id is never charged twice."),
    ] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Call an app (paid per call, from cash): its output as JSON on stdout, the charge on
    stderr; --json prints the whole answer (call id, output, price, duration)."""
    body = _payload("{}" if payload is None and files else payload)
    body = _attach(body, files or [])
    with connect(ctx, url, api_key) as client:
        done = client.invoke(slug, body, call_id)
    if as_json:
        print_json(done)
        return
    typer.echo(json.dumps(done.output, indent=2, ensure_ascii=False))
    typer.echo(
        f"charged {done.price} {done.currency}, {done.duration_ms} ms, call {done.call_id}",
        err=True,
    )


def publish(
    ctx: typer.Context,
    folder: Annotated[
        Path,
        typer.Argument(help=f"The app's folder: {core_apps.MANIFEST_FILE} and its code."),
    ],
    submit: Annotated[
        bool, typer.Option("--submit", help="Ask for review at once (the operator lists it).")
    ] = False,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Publish a new version of your app (the first creates it, as a draft)."""
    manifest = folder / core_apps.MANIFEST_FILE
    if not manifest.is_file():
        raise InvalidInput(f"{folder} has no {core_apps.MANIFEST_FILE}")
    names = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()]
    code = core_apps.pack({n: (folder / n).read_bytes() for n in core_apps.code_files(names)})
    with connect(ctx, url, api_key) as client:
        a = client.publish_app(manifest.read_text(), code)
        if submit:
            a = client.submit_app(a.slug)
    if as_json:
        print_json(a)
        return
    out.print(f"published {escape(a.slug)} version {a.version}: {a.status}")


def submit(
    ctx: typer.Context,
    slug: SlugArgument,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Ask the operator to review your app's current version."""
    with connect(ctx, url, api_key) as client:
        a = client.submit_app(slug)
    print_json(a) if as_json else out.print(f"{escape(a.slug)} version {a.version}: {a.status}")


def rollback(
    ctx: typer.Context,
    slug: SlugArgument,
    version: Annotated[int, typer.Argument(help="An earlier version the operator approved.")],
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Serve an earlier approved version again, at once."""
    with connect(ctx, url, api_key) as client:
        a = client.rollback_app(slug, version)
    print_json(a) if as_json else out.print(f"{escape(a.slug)} serves version {a.version}")


def earnings(
    ctx: typer.Context,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Your apps' calls and earnings: pending (younger than 7 days), available, paid."""
    with connect(ctx, url, api_key) as client:
        e = client.earnings()
    if as_json:
        print_json(e)
        return
    rows = [("calls", str(e.calls)), ("refunded", str(e.refunded)), ("revenue", e.gross),
            ("your share", e.developer_share), ("pending", e.pending),
            ("available", e.available), ("in payout", e.in_payout), ("paid", e.paid)]  # fmt: skip
    for name, value in rows:
        unit = f" {e.currency}" if name not in ("calls", "refunded") else ""
        out.print(f"{name:<11} {value}{unit}")


def payout(
    ctx: typer.Context,
    amount: Annotated[
        str | None, typer.Option("--amount", help="How much (default: all that is available).")
    ] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Ask to be paid your available earnings; the operator pays and marks it paid."""
    with connect(ctx, url, api_key) as client:
        p = client.request_payout(amount)
    if as_json:
        print_json(p)
        return
    out.print(f"payout {p.id}: {p.amount} {p.currency}, {p.status}")


def payouts(
    ctx: typer.Context,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Your payouts, oldest first."""
    with connect(ctx, url, api_key) as client:
        rows = client.payouts()
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print("no payouts yet")
    for p in rows:
        paid = f", paid {p.paid_at:%Y-%m-%d}" if p.paid_at else ""
        out.print(f"{p.id}  {p.amount} {p.currency}  {p.status}{paid}")


def decide(
    ctx: typer.Context,
    action: Annotated[str, typer.Argument(help="approve, reject or delist.")],
    slug: SlugArgument,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (needed to reject); the developer sees it.")
    ] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Review an app (admin): approve lists the version under review; reject or delist with a
    reason."""
    if action not in ("approve", "reject", "delist"):
        raise InvalidInput(f"{action!r}: approve, reject or delist")
    with connect(ctx, url, api_key) as client:
        a = client.admin_decide_app(slug, action, reason)
    print_json(a) if as_json else out.print(f"{escape(a.slug)} version {a.version}: {a.status}")
