"""What every client command shares: the connection options, the client, and output helpers.

Where the URL and key come from, first match wins: the command's `--url`/`--api-key`, the global
ones (or `CARDHOUR_URL`/`CARDHOUR_API_KEY`), the config file, the default URL. The saved key is
sent only to the saved URL, so pointing `--url` elsewhere never leaks it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console

from cardhour.cli import config
from cardhour.client import DEFAULT_URL, CardhourClient
from cardhour.core.errors import InvalidInput

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help=f"Server URL (default: the saved one, else {DEFAULT_URL}).",
        show_default=False,
    ),
]
KeyOption = Annotated[
    str | None,
    typer.Option("--api-key", help="API key (default: the saved one).", show_default=False),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON to stdout and nothing else.")]

#: Human output. Errors never go through Rich: they must stay one unwrapped line.
out = Console(highlight=False)


@dataclass(frozen=True)
class Connection:
    """The global `--url`/`--api-key`, kept on the root context's `obj`."""

    url: str | None = None
    api_key: str | None = None


def connect(ctx: typer.Context, url: str | None, api_key: str | None) -> CardhourClient:
    """A client for the resolved server and key (see the module docstring for the order)."""
    root = ctx.obj if isinstance(ctx.obj, Connection) else Connection()
    saved = config.load()
    resolved = (url or root.url or saved.url or DEFAULT_URL).rstrip("/")
    key = api_key or root.api_key
    if key is None and saved.url and saved.url.rstrip("/") == resolved:
        key = saved.api_key
    return CardhourClient(resolved, key)


def print_json(data: BaseModel | Sequence[BaseModel]) -> None:
    """`model_dump(mode="json")` of one model or a list, as indented JSON on stdout."""
    if isinstance(data, BaseModel):
        payload: object = data.model_dump(mode="json")
    else:
        payload = [item.model_dump(mode="json") for item in data]
    typer.echo(json.dumps(payload, indent=2, ensure_ascii=False))


KEY_PREFIXES = ("ssh-", "ecdsa-", "sk-")


def read_key(value: str) -> str:
    """A key given on the command line: the key text itself, `-` for standard input, or the
    path of a file (`~` expanded). The text is checked by the server, not here."""
    if value.startswith(KEY_PREFIXES):
        return value.strip()
    if value == "-":
        return sys.stdin.read()
    path = Path(value).expanduser()
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or "not a text file"
        raise InvalidInput(
            f"{value!r} is neither a readable file ({why}) nor an OpenSSH public key"
        ) from exc


def invalid_setting(exc: ValidationError) -> InvalidInput:
    """A settings object's first validation error as the CLI's one-line error."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return InvalidInput(f"setting {where}: {first['msg']}")
