"""`cardhour status | stop | start | down`: look at and change instances by name or id."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape

from cardhour.api.schemas import InstanceRead, StartChoicesRead
from cardhour.cli.common import JsonOption, KeyOption, UrlOption, connect, out, print_json
from cardhour.cli.compute import ssh as ssh_config
from cardhour.cli.render import (
    choices_table,
    cluster_table,
    events_table,
    instance_detail,
    instance_table,
    stages_table,
    status_text,
)
from cardhour.client import ApiError
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
    ctx: typer.Context,
    name: NameArgument,
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait in the queue for the GPUs of its disk's host.")
    ] = False,
    no_gpu: Annotated[
        bool,
        typer.Option("--no-gpu", help="Run from its disk now without GPUs (CPU only, per hour)."),
    ] = False,
    move: Annotated[
        bool,
        typer.Option("--move", help="Copy its disk to a host with the GPUs free; start there."),
    ] = False,
    choices: Annotated[
        bool, typer.Option("--choices", help="Only show what a start can do now.")
    ] = False,
    json_out: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Start a stopped instance again. One whose stop kept its disk starts on the disk's host;
    when that host's GPUs are taken, it shows the choices: --wait, --no-gpu or --move."""
    picked = [m for m, on in (("wait", wait), ("no_gpu", no_gpu), ("move", move)) if on]
    if len(picked) > 1:
        raise typer.BadParameter("give at most one of --wait, --no-gpu, --move")
    with connect(ctx, url, api_key) as client:
        if choices:
            found = client.start_choices(name)
            if json_out:
                print_json(found)
            else:
                out.print(choices_table(found))
            return
        try:
            started = client.start(name, mode=picked[0] if picked else None)
        except ApiError as exc:
            if exc.code == "start_choice_needed":
                out.print(choices_table(StartChoicesRead.model_validate(exc.details)))
            raise
    if json_out:
        print_json(started)
    else:
        _report(started)


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
