"""`cardhour balance`: what the account can spend, and what running instances cost per hour."""

from __future__ import annotations

import typer
from rich.table import Table

from cardhour.cli.common import JsonOption, KeyOption, UrlOption, connect, out, print_json


def balance(
    ctx: typer.Context,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Show the balance: cash, each credit (spent before cash), what is held for instances,
    and the hourly commitment."""
    with connect(ctx, url, api_key) as client:
        bal = client.balance()
    if as_json:
        print_json(bal)
        return
    table = Table(box=None, show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_column()
    table.add_row("available", f"{bal.available} {bal.currency}")
    table.add_row("  cash", f"{bal.cash} {bal.currency}")
    for credit in bal.credits:
        if credit.expired:
            continue
        notes = []
        if credit.gpu_models:
            notes.append("for " + ", ".join(credit.gpu_models))
        if credit.expires_at:
            notes.append(f"expires {credit.expires_at:%Y-%m-%d %H:%M} UTC")
        label = credit.kind.replace("_", " ")
        table.add_row(f"  {label}", f"{credit.balance} {bal.currency}", "; ".join(notes))
    table.add_row("held for instances", f"{bal.held} {bal.currency}")
    table.add_row("committed per hour", f"{bal.committed_per_hour} {bal.currency}")
    out.print(table)
    if bal.low_balance_since is not None:
        out.print(
            "[red]your balance cannot cover the next minute of your running instances: "
            "they stop soon unless you top up[/]"
        )
