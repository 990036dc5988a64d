"""`cardhour launch`: create an instance and follow it until it runs (or fails).

Progress comes from the instance's events, so a stage passed between two polls is still shown.
Exit 0 when it runs (or at once with --no-wait); exit 2 when it fails or the wait times out.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.markup import escape

from cardhour.api.schemas import InstanceCreate, InstanceRead
from cardhour.cli.common import JsonOption, KeyOption, UrlOption, connect, out, print_json, read_key
from cardhour.cli.compute import ssh as ssh_config
from cardhour.cli.render import connection_rows, status_text
from cardhour.client import CardhourClient
from cardhour.client.connection import new_idempotency_key
from cardhour.core.errors import CardhourError, InvalidInput
from cardhour.core.gpus import parse_gpu_request
from cardhour.core.states import InstanceStatus

POLL_SECONDS = 0.5
#: Where a launch stops moving on its own.
SETTLED = frozenset(
    {
        InstanceStatus.RUNNING,
        InstanceStatus.FAILED,
        InstanceStatus.STOPPED,
        InstanceStatus.TERMINATED,
    }
)


class LaunchFailed(CardhourError):
    code = "launch_failed"


class WaitTimeout(CardhourError):
    code = "timeout"


class Interrupted(CardhourError):
    code = "interrupted"


def launch(
    ctx: typer.Context,
    gpu: Annotated[str, typer.Option("--gpu", help="MODEL:COUNT, e.g. H100:1 or A800:8.")],
    name: Annotated[str | None, typer.Option("--name", help="Instance name.")] = None,
    image: Annotated[
        str | None,
        typer.Option(
            "--image",
            help="A catalog image id (`cardhour images`), or an OCI reference from a registry "
            "the fleet allows, e.g. docker.io/library/ubuntu:24.04.",
        ),
    ] = None,
    command: Annotated[
        str | None,
        typer.Option(
            "--command", help="Run by `sh -c` in the container (default: none, it idles)."
        ),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", help="NAME=VALUE environment variable (repeatable)."),
    ] = None,
    port: Annotated[
        list[str] | None,
        typer.Option("--port", help="Container port to publish (repeatable; not 22)."),
    ] = None,
    dc: Annotated[
        str | None,
        typer.Option(
            "--dc", help="The data centre it must run in (default: anywhere, or its volumes')."
        ),
    ] = None,
    volume: Annotated[
        list[str] | None,
        typer.Option(
            "--volume",
            help="NAME:/path: one of your volumes (`cardhour volumes`) mounted read-write "
            "(repeatable); the instance runs where the volume is.",
        ),
    ] = None,
    ssh_key: Annotated[
        str | None,
        typer.Option("--ssh-key", help="OpenSSH public key, or the path of a .pub file."),
    ] = None,
    plan: Annotated[
        str,
        typer.Option(
            "--plan",
            help="on_demand (per second; one hour held up front) or monthly (30 days prepaid "
            "at 35% off, charged when it first runs; it keeps its GPUs until the plan ends).",
        ),
    ] = "on_demand",
    at_expiry: Annotated[
        str,
        typer.Option("--at-expiry", help="Monthly plan: stop or on_demand when the 30 days end."),
    ] = "stop",
    quote: Annotated[
        str | None,
        typer.Option("--quote", help="A quote id from `cardhour quote`: its price is honoured."),
    ] = None,
    weights: Annotated[
        str | None,
        typer.Option(
            "--weights",
            help="Model weights to mount at /models/ID (e.g. llama3-70b); placement prefers "
            "a data centre that caches them (`cardhour offers --weights ID`).",
        ),
    ] = None,
    bare_metal: Annotated[
        bool,
        typer.Option(
            "--bare-metal",
            help="Whole nodes held exclusively (count a multiple of a node's GPUs, e.g. "
            "H100:8): nothing else shares them.",
        ),
    ] = False,
    nodes: Annotated[
        int,
        typer.Option(
            "--nodes",
            min=1,
            max=128,
            help="A cluster of this many nodes, each with --gpu's count (use a whole node, "
            "e.g. --gpu H100:8 --nodes 2): gang-placed on the fewest InfiniBand leaves.",
        ),
    ] = 1,
    movable: Annotated[
        bool,
        typer.Option(
            "--movable",
            help="Let the operator live-migrate it to defragment the fleet "
            "(moves are only proposed to the operator so far).",
        ),
    ] = False,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Follow the launch until it runs.")
    ] = True,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0, help="Seconds to wait for it to run.")
    ] = 300.0,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Launch an instance. On demand, one hour of it is held from your balance up front and
    usage is billed per second; a monthly plan holds the 30 days' price instead."""
    req = parse_gpu_request(gpu)
    body = _body(
        gpu=req.model,
        count=req.count,
        nodes=nodes,
        weights=weights,
        bare_metal=bare_metal,
        name=name,
        image=image,
        command=command,
        env=parse_env(env or []),
        ports=parse_ports(port or []),
        volumes=list(volume or []),
        data_centre=dc,
        ssh_key=read_key(ssh_key) if ssh_key is not None else None,
        plan=plan,
        at_expiry=at_expiry,
        quote_id=quote,
        movable=movable,
    )
    with connect(ctx, url, api_key) as client:
        # one key per invocation: the client's retries after a network error launch once
        inst = client.create_instance(body, idempotency_key=new_idempotency_key())
        if not as_json:
            out.print(
                f"launching [bold]{escape(inst.name)}[/]: {inst.count} × {escape(inst.gpu)} "
                f"at {inst.price_per_card_hour} {inst.currency} per card-hour (id {inst.id})"
            )
        if wait:
            inst = _follow(client, inst, timeout, show=not as_json)
        elif not as_json:
            out.print(f"follow it with `cardhour status {escape(inst.name)}`")
    if as_json:
        print_json(inst)
    elif inst.status == InstanceStatus.RUNNING:
        out.print(f"[green]{escape(inst.name)} is running[/]")
        for key, value in connection_rows(inst):
            out.print(f"  {key}: {value}")
        for container_port, where in inst.published.items():
            out.print(f"  port {escape(container_port)}: {escape(where)}")
        for mount in inst.volumes:
            out.print(f"  volume {escape(mount.volume)}: {escape(mount.path)}")
    written = inst.status == InstanceStatus.RUNNING and ssh_config.write(inst) is not None
    if written and not as_json:
        workers = len(inst.cluster.nodes) - 1 if inst.cluster is not None else 0
        more = f" and `ssh {inst.name}-worker1` … `-worker{workers}`" if workers else ""
        out.print(f"  ssh config written: `ssh {escape(inst.name)}`{escape(more)}")
    if wait and inst.status != InstanceStatus.RUNNING:
        reason = f": {inst.status_reason}" if inst.status_reason else ""
        raise LaunchFailed(f"{inst.name} is {inst.status}{reason}")


def parse_env(items: list[str]) -> dict[str, str]:
    """`--env NAME=VALUE` options, in order; InvalidInput for one without `=` or a name twice
    (the names and values themselves are checked by `InstanceCreate`)."""
    env: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise InvalidInput(f"--env {item!r}: expected NAME=VALUE")
        if name in env:
            raise InvalidInput(f"--env {name} is given twice")
        env[name] = value
    return env


def parse_ports(items: list[str]) -> list[int]:
    """`--port N` options; InvalidInput for one that is not a number."""
    ports = []
    for item in items:
        try:
            ports.append(int(item))
        except ValueError:
            raise InvalidInput(f"--port {item!r} is not a port number") from None
    return ports


def _body(**fields: object) -> InstanceCreate:
    """The launch's body; InvalidInput with the API's message for a field it refuses."""
    try:
        return InstanceCreate.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        if first["type"] == "invalid_input":  # the message names the field
            raise InvalidInput(first["msg"]) from None
        raise InvalidInput(f"{where}: {first['msg']}") from None


def _follow(client: CardhourClient, inst: InstanceRead, timeout: float, show: bool) -> InstanceRead:
    """Poll until the instance settles; print each new event as a stage line when `show`."""
    deadline = time.monotonic() + timeout
    shown = 0
    try:
        while True:
            if show:
                for event in inst.events[shown:]:
                    reason = f" ({escape(event.reason)})" if event.reason else ""
                    out.print(f"  → {status_text(event.to_status)}{reason}")
                shown = len(inst.events)
            if inst.status in SETTLED:
                return inst
            if time.monotonic() >= deadline:
                raise WaitTimeout(
                    f"{inst.name} is still {inst.status} after {timeout:g} s; "
                    f"follow it with `cardhour status {inst.name}`"
                )
            time.sleep(POLL_SECONDS)
            inst = client.get_instance(inst.id)
    except KeyboardInterrupt:
        raise Interrupted(
            f"stopped waiting; {inst.name} keeps launching: `cardhour status {inst.name}`"
        ) from None
