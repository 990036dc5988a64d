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
    """Show the balance: cash plus trial credit, and the hourly commitment."""
    with connect(ctx, url, api_key) as client:
        bal = client.balance()
    if as_json:
        print_json(bal)
        return
    table = Table(box=None, show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_row("available", f"{bal.available} {bal.currency}")
    table.add_row("  cash", f"{bal.cash} {bal.currency}")
    table.add_row("  trial credit", f"{bal.trial_credit} {bal.currency}")
    table.add_row("committed per hour", f"{bal.committed_per_hour} {bal.currency}")
    out.print(table)
