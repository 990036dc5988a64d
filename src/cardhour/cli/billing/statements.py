"""`cardhour usage` (this month's usage so far) and `cardhour invoice` (a month's statement).

Both read `GET /api/v1/statements/{month}`; what each figure means is in docs/dev/statements.md.
"""

from __future__ import annotations

import json
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from cardhour.api.schemas.statements import StatementRead
from cardhour.cli.common import JsonOption, KeyOption, UrlOption, connect, out, print_json
from cardhour.core.money import Money

MonthArgument = Annotated[str, typer.Argument(help="The month, YYYY-MM (UTC).")]


def money(amount: str) -> str:
    """A six-decimal amount for people: two decimals, more only when needed."""
    return Money.parse(amount).display()


def card_hours(card_seconds: int) -> str:
    hours = (Decimal(card_seconds) / 3600).quantize(Decimal("0.0001"), ROUND_HALF_UP)
    return f"{hours:,}".rstrip("0").rstrip(".") or "0"


def usage(
    ctx: typer.Context,
    month: Annotated[
        str | None,
        typer.Option("--month", help="YYYY-MM (UTC); default: the server's current month."),
    ] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Usage so far this month (or in --month): one line per instance and price, and totals.
    Running instances count up to now."""
    with connect(ctx, url, api_key) as client:
        st = client.statement(month or "current")
    if as_json:
        keep = {"month", "currency", "period_start", "period_end", "complete", "usage_lines",
                "plan_lines", "storage_lines", "usage_total", "plan_total", "storage_total",
                "total"}  # fmt: skip
        typer.echo(json.dumps(st.model_dump(mode="json", include=keep), indent=2))
        return
    _heading(st)
    _lines(st)
    _totals(st)


def invoice(
    ctx: typer.Context,
    month: MonthArgument,
    as_json: JsonOption = False,
    csv_file: Annotated[
        str | None,
        typer.Option(
            "--csv", help="Write the statement as CSV to FILE ('-': stdout).", metavar="FILE"
        ),
    ] = None,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """The statement of a month: usage and plan lines, how they were paid, and the balance at
    the month's start and end."""
    if as_json and csv_file is not None:
        raise typer.BadParameter("choose --json or --csv, not both")
    with connect(ctx, url, api_key) as client:
        if csv_file is not None:
            text = client.statement_csv(month)
            if csv_file == "-":
                typer.echo(text, nl=False)
            else:
                Path(csv_file).write_text(text, encoding="utf-8")
                out.print(f"wrote {escape(csv_file)}")
            return
        st = client.statement(month)
    if as_json:
        print_json(st)
        return
    _heading(st)
    _lines(st)
    _totals(st)
    _paid(st)
    _balances(st)
    out.print(
        "[dim]Lines are usage in the month; charges and balances are what the ledger posted in "
        "it (a month's last minute of usage is posted early in the next).[/]"
    )


def _heading(st: StatementRead) -> None:
    end = "" if st.complete else f" (so far, to {st.period_end:%Y-%m-%d %H:%M:%S} UTC)"
    out.print(f"[bold]cardhour statement {st.month}[/]{end}, amounts in {st.currency}")


def _table(left: tuple[str, ...], right: tuple[str, ...]) -> Table:
    """A borderless table: the `left` columns, then the `right`-justified (figures) ones."""
    table = Table(box=None, header_style="bold")
    for column in left:
        table.add_column(column, no_wrap=True)
    for column in right:
        table.add_column(column, no_wrap=True, justify="right")
    return table


def _lines(st: StatementRead) -> None:
    if not st.usage_lines and not st.plan_lines and not st.storage_lines:
        out.print("no usage in this month")
        return
    if st.usage_lines:
        table = _table(("INSTANCE", "GPUS", "WHERE"), ("CARD-HOURS", "PER CARD-HOUR", "AMOUNT"))
        for u in st.usage_lines:
            table.add_row(
                escape(u.instance_name) + (" [yellow](running)[/]" if u.running else ""),
                escape(f"{u.gpu_count} × {u.gpu_model}" if u.gpu_count else "no GPU (hours)"),
                escape(u.data_centre or "-"),
                card_hours(u.card_seconds),
                money(u.rate_per_card_hour),
                money(u.amount),
            )
        out.print(table)
    if st.plan_lines:
        table = _table(("MONTHLY PLAN", "GPUS", "POSTED"), ("AMOUNT",))
        for p in st.plan_lines:
            label = "refund" if p.kind == "plan_refund" else "30 days prepaid"
            table.add_row(
                f"{escape(p.instance_name)} ({label})",
                escape(f"{p.gpu_count} × {p.gpu_model}"),
                f"{p.posted_at:%Y-%m-%d %H:%M} UTC",
                money(p.amount),
            )
        out.print(table)
    if st.storage_lines:
        table = _table(("VOLUME", "SIZE", "WHERE"), ("GB-HOURS", "PER GB-HOUR", "AMOUNT"))
        for v in st.storage_lines:
            table.add_row(
                escape(v.volume_name) + (" [yellow](kept)[/]" if v.kept else ""),
                f"{v.size_gb} GiB",
                escape(v.data_centre),
                card_hours(v.gb_seconds),
                v.rate_per_gb_hour,
                money(v.amount),
            )
        out.print(table)


def _pairs(rows: list[tuple[str, str]]) -> Table:
    table = Table(box=None, show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    for label, amount in rows:
        table.add_row(label, money(amount))
    return table


def _totals(st: StatementRead) -> None:
    rows = [("usage", st.usage_total)]
    if st.plan_lines:
        rows.append(("monthly plans", st.plan_total))
    if st.storage_lines:
        rows.append(("volumes", st.storage_total))
    rows.append(("total", st.total))
    out.print(_pairs(rows))


def _paid(st: StatementRead) -> None:
    out.print("[bold]charges posted in the month[/]")
    rows = [(f"  paid from {k.replace('_', ' ')}", v) for k, v in st.paid_from.items()]
    out.print(_pairs([*rows, ("  charged", st.charged)]))
    if Money.parse(st.paid_by_grants).micros:
        out.print(_pairs([(f"  paid by grants ({st.grant_card_hours} card-h)", st.paid_by_grants)]))


def _balances(st: StatementRead) -> None:
    m = st.movements
    rows = [("opening balance", st.opening.total), ("  top-ups", m.top_ups)]
    rows += [(f"  {k.replace('_', ' ')} granted", v) for k, v in m.credits_granted.items()]
    rows += [(f"  {k.replace('_', ' ')} expired", v) for k, v in m.credits_expired.items()]
    rows.append(("  usage charged", m.usage_charged))
    for label, amount in (("plans charged", m.plan_charged), ("plan refunds", m.plan_refunds),
                          ("volumes charged", m.storage_charged), ("other", m.other)):  # fmt: skip
        if Money.parse(amount).micros:
            rows.append((f"  {label}", amount))
    rows.append(("closing balance", st.closing.total))
    c = st.closing
    rows += [("  cash", c.cash), ("  credits", c.credits), ("  held for instances", c.held)]
    out.print(_pairs(rows))
