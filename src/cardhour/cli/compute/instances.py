"""`cardhour status | stop | start | down`: look at and change instances by name or id."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape

from cardhour.api.schemas import InstanceRead
from cardhour.cli.common import JsonOption, KeyOption, UrlOption, connect, out, print_json
from cardhour.cli.compute import ssh as ssh_config
from cardhour.cli.render import (
    cluster_table,
    events_table,
    instance_detail,
    instance_table,
    stages_table,
    status_text,
)
from cardhour.core.states import InstanceStatus

NameArgument = Annotated[str, typer.Argument(help="Instance name or id.", show_default=False)]


def status(
    ctx: typer.Context,
    name: Annotated[
        str | None, typer.Argument(help="One instance (name or id); omit to list them all.")
    ] = None,
    all: Annotated[bool, typer.Option("--all", help="Include terminated instances.")] = False,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """List instances, or show one with its history."""
    with connect(ctx, url, api_key) as client:
        if name is None:
            found = client.list_instances(all=all)
            if as_json:
                print_json(found)
            elif found:
                out.print(instance_table(found))
            else:
                out.print("no instances" + ("" if all else " (add --all to see terminated ones)"))
            return
        inst = client.get_instance(name)
    if inst.status == InstanceStatus.RUNNING:
        ssh_config.write(inst)  # refresh `ssh NAME` (addresses move when it is placed again)
    if as_json:
        print_json(inst)
        return
    out.print(instance_detail(inst))
    nodes = cluster_table(inst)
    if nodes is not None:
        out.print()
        out.print(nodes)
    if inst.stages:
        out.print()
        out.print(stages_table(inst))
    if inst.events:
        out.print()
        out.print(events_table(inst))


def stop(
    ctx: typer.Context, name: NameArgument, url: UrlOption = None, api_key: KeyOption = None
) -> None:
    """Stop: billing stops and the GPUs are released; a later start may land on other GPUs, or
    wait for some to be free."""
    with connect(ctx, url, api_key) as client:
        _report(client.stop(name))
    out.print("stopped instances cost nothing; their GPUs go back to the pool until you start")


def start(
    ctx: typer.Context, name: NameArgument, url: UrlOption = None, api_key: KeyOption = None
) -> None:
    """Start a stopped instance again (it is scheduled and provisioned anew)."""
    with connect(ctx, url, api_key) as client:
        _report(client.start(name))


def down(
    ctx: typer.Context,
    name: NameArgument,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Terminate an instance for good. Asks first when run interactively without --yes."""
    if not yes and sys.stdin.isatty():
        typer.confirm(f"Terminate {name}? This cannot be undone", abort=True)
    with connect(ctx, url, api_key) as client:
        inst = client.terminate(name)
    ssh_config.remove(inst.name)
    _report(inst)


def _report(inst: InstanceRead) -> None:
    out.print(f"{escape(inst.name)}: {status_text(inst.status)}")
