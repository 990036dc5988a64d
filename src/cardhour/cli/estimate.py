"""`cardhour estimate`: training time and cost, or `--check` of a published or quoted claim.

Runs locally (no server): the price book comes from the fleet file (`--fleet-file`, else
`CARDHOUR_FLEET_FILE`, else the demo fleet). `--json` prints `EstimateRead` and nothing else.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from cardhour.cli.common import JsonOption, out, print_json
from cardhour.estimator import EstimateQuery, EstimateRead, run
from cardhour.estimator.explain import sci, short_count


def estimate(
    tokens: Annotated[
        str, typer.Option("--tokens", help="Training tokens: 15T, 15.6T, 500B, 2e12.")
    ],
    model: Annotated[
        str | None,
        typer.Option("--model", help="Preset: llama3-8b, llama3-70b, llama3.1-405b, …"),
    ] = None,
    params: Annotated[str | None, typer.Option("--params", help="Custom model: 7B.")] = None,
    layers: Annotated[str | None, typer.Option("--layers", help="Layers (L).")] = None,
    hidden: Annotated[str | None, typer.Option("--hidden", help="Hidden size (H·Q).")] = None,
    seq_len: Annotated[str | None, typer.Option("--seq-len", help="Sequence length (T).")] = None,
    mode: Annotated[str, typer.Option("--mode", help="pretrain, full or lora.")] = "pretrain",
    gpu: Annotated[str, typer.Option("--gpu", help="GPU model: H100, A800, RTX4090, …")] = "H100",
    gpus: Annotated[str, typer.Option("--gpus", help="Number of GPUs.")] = "8",
    mfu: Annotated[
        str | None, typer.Option("--mfu", help="Model FLOPs utilisation (default by GPU, scale).")
    ] = None,
    goodput: Annotated[
        str | None, typer.Option("--goodput", help="Share of wall time training (default 0.9).")
    ] = None,
    price: Annotated[
        str | None, typer.Option("--price", help="Per card-hour (default: the price book).")
    ] = None,
    usd_cny: Annotated[
        str | None, typer.Option("--usd-cny", help="CNY per USD for the comparison.")
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Check a claim: the MFU it implies, feasible or not.")
    ] = False,
    days: Annotated[str | None, typer.Option("--days", help="Claim: days on --gpus.")] = None,
    gpu_hours: Annotated[
        str | None, typer.Option("--gpu-hours", help="Claim: total GPU-hours (6.4M).")
    ] = None,
    fleet_file: Annotated[
        Path | None, typer.Option("--fleet-file", help="Price book (default: the demo fleet).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """How long and how much to train a model on GPUs; `--check` whether a claim can be true."""
    from cardhour.settings import Settings, load_catalog  # the fleet loader pulls in numpy

    catalog = load_catalog(fleet_file or Settings().fleet_file)
    query = EstimateQuery(
        tokens=tokens, gpu=gpu, gpus=gpus, model=model, params=params, layers=layers,
        hidden=hidden, seq_len=seq_len, mode=mode, mfu=mfu, goodput=goodput, price=price,
        usd_cny=usd_cny, check=check, days=days, gpu_hours=gpu_hours,
    )  # fmt: skip
    report = run(query, catalog)
    if as_json:
        print_json(report)
        return
    show(report)


def _n(value: float, places: int = 2) -> str:
    return f"{value:,.{places}f}"


def _cny(text: str | None) -> str:
    if text is None:
        return "—"
    return f"{Decimal(text).quantize(Decimal('0.01'), rounding=ROUND_HALF_UP):,}"


def show(r: EstimateRead) -> None:
    """The human rendering: summary, the check's verdict, the formula, other providers."""
    title = f"{r.model.name} · {r.mode} · {short_count(r.tokens)} tokens"
    out.print(escape(f"{title} · {r.gpus:,} × {r.gpu.name}"), style="bold")
    rows = [
        (
            "FLOPs",
            f"{sci(r.flops)} (dense {sci(r.flops_dense)} + attention {sci(r.flops_attention)})",
        ),
        ("MFU", f"{r.mfu:g} ({r.mfu_basis})"),
        ("goodput", f"{r.goodput:g} ({r.goodput_basis})"),
        ("tokens/s per GPU", _n(r.tokens_per_second_per_gpu, 1)),
        ("wall clock", f"{_n(r.days, 2)} days ({r.seconds:,} s) on {r.gpus:,} GPUs"),
        ("GPU-hours", _n(r.gpu_hours)),
    ]
    if r.cost_on_demand is not None:
        rows += [
            ("on demand", f"{_cny(r.cost_on_demand)} {r.currency} at {r.price_on_demand} "
             f"per card-hour ({r.price_source})"),
            ("monthly plan", f"{_cny(r.cost_monthly)} {r.currency} for {r.monthly_plan_months} "
             f"× 30 days at {r.price_monthly} (pro rata {_cny(r.cost_monthly_pro_rata)})"),
        ]  # fmt: skip
    if r.verdict is not None:
        rows = [
            ("claim", f"{_n(r.claim_gpu_hours or 0)} GPU-hours = {_n(r.claim_days or 0, 2)} days "
             f"on {r.gpus:,} GPUs" + (f", {_cny(r.claim_cost_on_demand)} {r.currency} on demand"
                                       if r.claim_cost_on_demand else "")),
            ("implied MFU", f"{r.implied_mfu:.4f} end to end "
             f"({r.implied_mfu_dense:.4f} by the dense term alone); ceiling {r.mfu_ceiling:g}"),
            ("feasible", "yes" if r.feasible else f"no: short by {r.shortfall_x:,.2f}×"),
            ("our estimate", f"{_n(r.gpu_hours)} GPU-hours, {_n(r.days, 2)} days at MFU "
             f"{r.mfu:g} × goodput {r.goodput:g}"),
            ("FLOPs", rows[0][1]),
        ]  # fmt: skip
    table = Table(box=None, show_header=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for label, value in rows:
        table.add_row(label, escape(value))
    out.print(table)
    if r.verdict:
        out.print(escape(r.verdict))
    for warning in r.warnings:
        out.print(f"[yellow]warning:[/] {escape(warning)}")
    out.print("\n[bold]formula[/]")
    for line in r.formula:
        out.print("  " + escape(line), soft_wrap=True)
    if r.comparison:
        out.print(
            f"\n[bold]the same GPU-hours elsewhere[/] (USD at {r.usd_cny} CNY, set "
            f"{r.usd_cny_as_of}, not live: --usd-cny)"
        )
        out.print(_comparison(r))
        for line in _sources(r):
            out.print("  " + escape(line), soft_wrap=True, style="dim")


def _comparison(r: EstimateRead) -> Table:
    table = Table(box=None, header_style="bold")
    table.add_column("PROVIDER", overflow="fold")
    for column in ("PER GPU-HOUR", "IN CNY", "COST (CNY)", "WE SAVE (CNY)", "%"):
        table.add_column(column, no_wrap=True, justify="right")
    for c in r.comparison:
        table.add_row(
            escape(c.provider),
            f"{c.price} {c.price_currency}",
            c.price_cny,
            _cny(c.cost),
            _cny(c.savings),
            f"{c.savings_percent}%" if c.savings_percent is not None else "—",
        )
    return table


def _sources(r: EstimateRead) -> list[str]:
    seen: dict[str, None] = {}
    for c in r.comparison:
        note = f"; {c.note}" if c.note else ""
        seen[f"{c.provider}: {c.source}, {c.as_of}{note}"] = None
    return list(seen)
