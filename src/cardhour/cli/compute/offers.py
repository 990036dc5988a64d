"""`cardhour offers`: live inventory with per-card-hour prices (no account needed)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from cardhour.api.schemas import OfferRead
from cardhour.cli.common import JsonOption, KeyOption, UrlOption, connect, out, print_json


def offers(
    ctx: typer.Context,
    gpu: Annotated[
        str | None,
        typer.Option("--gpu", help="Model, or MODEL:COUNT (e.g. H100:8) for a placement quote."),
    ] = None,
    weights: Annotated[
        str | None,
        typer.Option("--weights", help="Model weights (e.g. llama3-70b): cached where?"),
    ] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """List what can be rented now, per data centre, with prices."""
    with connect(ctx, url, api_key) as client:
        found = client.offers(gpu=gpu, weights=weights)
    if as_json:
        print_json(found)
        return
    if not found:
        out.print("no offers match")
        return
    out.print(_table(found))
    for offer in found:
        rec = offer.recommendation
        if rec is not None:
            note = rec.summary if rec.available else f"not available: {rec.reason or rec.summary}"
            line = f"{offer.quote.count} × {offer.gpu} in {offer.data_centre}: {note}"
            out.print(escape(line))


def _table(found: list[OfferRead]) -> Table:
    quoted = any(o.recommendation is not None for o in found)
    table = Table(box=None, header_style="bold")
    for column in ("GPU", "DATA CENTRE", "FREE", "PER CARD-HOUR", "MONTHLY PLAN"):
        table.add_column(column)
    if quoted:
        table.add_column("QUOTE / HOUR")
    with_weights = any(o.weights is not None for o in found)
    if with_weights:
        table.add_column("WEIGHTS")
    for o in found:
        row = [
            escape(f"{o.gpu} ({o.spec.memory_gb} GB)"),
            escape(f"{o.data_centre} ({o.ownership})"),
            f"{o.free_gpus}/{o.total_gpus}",
            f"{o.price_per_card_hour} {o.currency}",
            f"{o.monthly_price_per_card_hour} {o.currency}",
        ]
        if quoted:
            row.append(f"{o.quote.per_hour} {o.currency} for {o.quote.count}")
        if with_weights and o.weights is not None:
            w = o.weights
            row.append("cached" if w.local else f"copied in ~{w.copy_seconds} s")
        table.add_row(*row)
    return table


def images(
    ctx: typer.Context,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """The images `launch --image` accepts, with their framework versions."""
    with connect(ctx, url, api_key) as client:
        found = client.images()
    if as_json:
        print_json(found)
        return
    for image in found:
        versions = ", ".join(f"{k} {v}" for k, v in sorted(image.versions.items()))
        default = " (default)" if image.default else ""
        out.print(f"[bold]{escape(image.id)}[/]{default}: {escape(image.name)}", soft_wrap=True)
        out.print(f"  {escape(image.description)}  [{escape(versions)}]", soft_wrap=True)
