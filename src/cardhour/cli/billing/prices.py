"""`cardhour prices`, `cardhour quote`, and the operator's `cardhour admin price|credit`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from cardhour.api.schemas import CreditCreate, PriceRead, PriceSet
from cardhour.cli.common import JsonOption, KeyOption, UrlOption, connect, out, print_json
from cardhour.client.connection import new_idempotency_key
from cardhour.core.gpus import parse_gpu_request


def prices(
    ctx: typer.Context,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """The price book: on-demand and monthly per card-hour, by GPU model and data centre, and
    changes already scheduled."""
    with connect(ctx, url, api_key) as client:
        lines = client.prices()
    if as_json:
        print_json(lines)
        return
    out.print(_prices_table(lines))


def _prices_table(lines: list[PriceRead]) -> Table:
    table = Table(box=None, header_style="bold")
    for column in ("GPU", "DATA CENTRE", "ON DEMAND /h", "MONTHLY /h", "FROM"):
        table.add_column(column, no_wrap=True)
    for line in lines:
        since = "in force" if line.current else f"{line.effective_from:%Y-%m-%d %H:%M} UTC"
        table.add_row(
            escape(line.gpu),
            escape(line.data_centre),
            f"{line.on_demand} {line.currency}",
            f"{line.monthly} {line.currency}",
            since,
        )
    return table


def quote(
    ctx: typer.Context,
    gpu: Annotated[str, typer.Option("--gpu", help="MODEL:COUNT, e.g. H100:8.")],
    plan: Annotated[str, typer.Option("--plan", help="on_demand or monthly.")] = "on_demand",
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """A price promised for a while: pass its id to `cardhour launch --quote`."""
    req = parse_gpu_request(gpu)
    with connect(ctx, url, api_key) as client:
        q = client.quote(req.model, req.count, plan)
    if as_json:
        print_json(q)
        return
    total = f", {q.plan_total} {q.currency} for 30 days" if q.plan_total else ""
    out.print(
        f"quote {q.id}: {q.count} × {escape(q.gpu)} ({q.plan}) at {q.price_per_card_hour} "
        f"{q.currency} per card-hour = {q.per_hour} {q.currency}/h{total}; "
        f"valid until {q.valid_until:%Y-%m-%d %H:%M:%S} UTC"
    )


def set_price(
    ctx: typer.Context,
    gpu: Annotated[str, typer.Argument(help="GPU model, e.g. H100.")],
    price: Annotated[str, typer.Argument(help="On-demand price per card-hour, e.g. 2.10.")],
    data_centre: Annotated[
        str | None, typer.Option("--dc", help="Only this data centre (default: all with it).")
    ] = None,
    effective_from: Annotated[
        datetime | None,
        typer.Option("--from", help="When it takes effect (UTC, default now; never earlier)."),
    ] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Change an on-demand price. It applies to usage after it, running instances included."""
    body = PriceSet(gpu=gpu, price=price, data_centre=data_centre, effective_from=effective_from)
    with connect(ctx, url, api_key) as client:
        lines = client.admin_set_price(body)
    if as_json:
        print_json(lines)
        return
    out.print(_prices_table(lines))


def grant_credit(
    ctx: typer.Context,
    email: Annotated[str, typer.Argument(help="The account to credit.")],
    amount: Annotated[str, typer.Argument(help="Amount, e.g. 50.00.")],
    kind: Annotated[str, typer.Option("--kind", help="sla_credit or grant_credit.")] = "sla_credit",
    expires: Annotated[
        datetime | None, typer.Option("--expires", help="When it expires (UTC).")
    ] = None,
    gpus: Annotated[
        list[str] | None, typer.Option("--gpu", help="Only for this GPU model (repeatable).")
    ] = None,
    reference: Annotated[
        str | None, typer.Option("--reference", help="Granted once per reference.")
    ] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Give an account an SLA or grant credit: spent before cash, optionally for some models."""
    body = CreditCreate(
        email=email,
        kind=kind,
        amount=amount,
        expires_at=expires,
        gpu_models=gpus or [],
        reference=reference,
    )
    with connect(ctx, url, api_key) as client:
        credit = client.admin_grant_credit(body, idempotency_key=new_idempotency_key())
    if as_json:
        print_json(credit)
        return
    limits = f" for {', '.join(credit.gpu_models)}" if credit.gpu_models else ""
    until = f", expires {credit.expires_at:%Y-%m-%d %H:%M} UTC" if credit.expires_at else ""
    out.print(
        f"granted {credit.amount} {credit.currency} of {credit.kind} to {escape(credit.email)}"
        f"{limits}{until} (reference {escape(credit.reference)})"
    )
