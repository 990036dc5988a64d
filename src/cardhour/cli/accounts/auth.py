"""`cardhour signup` and `cardhour login`: get an API key and save it with the server URL."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from cardhour.api.schemas import AuthRead
from cardhour.cli import config
from cardhour.cli.common import KeyOption, UrlOption, connect, out

EmailOption = Annotated[str, typer.Option("--email", prompt=True, help="Account email.")]


def signup(
    ctx: typer.Context,
    email: EmailOption,
    password: Annotated[
        str,
        typer.Option(
            "--password",
            prompt=True,
            hide_input=True,
            confirmation_prompt=True,
            help="At least 8 characters; prompted (hidden) when omitted.",
        ),
    ],
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Create an account (it gets the trial credit) and save its API key."""
    with connect(ctx, url, api_key) as client:
        auth = client.signup(email, password)
        _save(client.url, auth, "signed up")


def login(
    ctx: typer.Context,
    email: EmailOption,
    password: Annotated[
        str,
        typer.Option(
            "--password", prompt=True, hide_input=True, help="Prompted (hidden) when omitted."
        ),
    ],
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Log in: issue a new API key for this machine and save it."""
    with connect(ctx, url, api_key) as client:
        auth = client.login(email, password)
        _save(client.url, auth, "logged in")


def _save(url: str, auth: AuthRead, verb: str) -> None:
    path = config.save(config.Config(url=url, api_key=auth.api_key))
    out.print(f"{verb} as [bold]{escape(auth.user.email)}[/] at {escape(url)}")
    out.print(f"API key saved to {escape(str(path))}")
