"""`cardhour ssh-keys add|list|remove`: the account's SSH public keys, which every new instance
gets in its `authorized_keys`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from cardhour.cli.common import (
    JsonOption,
    KeyOption,
    UrlOption,
    connect,
    out,
    print_json,
    read_key,
)


def add(
    ctx: typer.Context,
    key: Annotated[
        str,
        typer.Argument(
            help="The public key: a .pub file (e.g. ~/.ssh/id_ed25519.pub), '-' for stdin, "
            "or the key text."
        ),
    ],
    name: Annotated[
        str | None, typer.Option("--name", help="A name for it (default: its comment).")
    ] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Add an SSH public key to your account; instances launched from now on get it."""
    text = read_key(key)
    with connect(ctx, url, api_key) as client:
        row = client.add_ssh_key(text, name)
    if as_json:
        print_json(row)
        return
    out.print(
        f"added {escape(row.name)}: {row.type} {row.bits} bits, {row.fingerprint}",
        soft_wrap=True,
    )


def list_keys(
    ctx: typer.Context,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """List your SSH keys with their SHA256 fingerprints (compare with `ssh-keygen -l -f`)."""
    with connect(ctx, url, api_key) as client:
        rows = client.ssh_keys()
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print("no SSH keys: add one with `cardhour ssh-keys add ~/.ssh/id_ed25519.pub`")
        return
    # plain lines, not a table: a fingerprint is never wrapped or cut, whatever the width
    width = max(len(row.name) for row in rows)
    for row in rows:
        out.print(
            f"{escape(row.name.ljust(width))}  {row.type} {row.bits}  {row.fingerprint}  "
            f"added {row.created_at:%Y-%m-%d %H:%M} UTC",
            soft_wrap=True,
        )


def remove(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(help="The key's name, id or SHA256 fingerprint.")],
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Remove an SSH key. Instances already launched keep the keys they were given."""
    with connect(ctx, url, api_key) as client:
        row = client.remove_ssh_key(key)
    if as_json:
        print_json(row)
        return
    out.print(f"removed {escape(row.name)} ({row.fingerprint})", soft_wrap=True)
