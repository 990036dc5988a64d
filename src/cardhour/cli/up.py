"""`cardhour up`: the embedded server — API, console and reconcilers in this one process.

Order: settings (flags over `CARDHOUR_*` env) → platform (which compiles the scheduler's
kernels, or loads them from numba's cache) → admin account → listening socket →
reconciler threads → banner → uvicorn. The banner's first line, `cardhour is up at URL`, is
printed (and flushed) once the socket accepts connections. Ctrl-C or SIGTERM stops uvicorn,
then the platform. Server-side modules are imported inside `up` so that every other command
starts fast.
"""

from __future__ import annotations

import contextlib
import gc
import shutil
import signal
import socket
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError
from pydantic_settings import SettingsError

from cardhour.cli.common import invalid_setting
from cardhour.core.errors import InvalidInput

if TYPE_CHECKING:
    from cardhour.settings import Settings

# Shown when the platform takes a while to start: numba compiles the scheduler's kernels the
# first time (`make kernels` does it ahead), then loads them from its cache in under a second.
_SLOW_START = "cardhour: starting: compiling the scheduler's kernels (first start only, ~1-3 min)"


def up(
    host: Annotated[
        str | None, typer.Option("--host", help="Listen address (default: 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port; 0 picks a free one (default: 8000).")
    ] = None,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Database and state (default: .cardhour).")
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            help="sim (a simulated fleet, the default), hosts (GPU servers running "
            "`cardhour agent`), slurm.",
        ),
    ] = None,
) -> None:
    """Run cardhour here: API, web console and the GPU fleet (simulated unless --backend)."""
    import uvicorn

    from cardhour.api.app import create_app
    from cardhour.platform import Platform

    settings = _settings(host, port, data_dir, backend)
    slow = threading.Timer(3.0, typer.echo, (_SLOW_START,), {"err": True})
    slow.start()
    try:
        platform = Platform(settings)
    finally:
        slow.cancel()
    try:
        email, password = platform.bootstrap_admin()
        listed = [(a.slug, a.outcome) for a in platform.install_demo_apps()]
        sock = _listen(settings.host, settings.port)
        server = uvicorn.Server(
            uvicorn.Config(create_app(platform), log_level="info", access_log=False)
        )
        signal.signal(signal.SIGTERM, _interrupt)
        platform.start()
        _tune_collector()
        url = _url(settings.host, sock.getsockname()[1])
        _banner(url, email, password, settings.data_dir, listed)
        # uvicorn shuts down gracefully on a signal, then re-raises it: KeyboardInterrupt here.
        with contextlib.suppress(KeyboardInterrupt):
            server.run(sockets=[sock])
    finally:
        platform.stop()
    typer.echo("cardhour stopped", err=True)


def _tune_collector() -> None:
    """The collector's settings for a process holding a thousand agents' long polls (measured
    with `make bench-agents`, docs/benchmarks/agents.md):
    - what start-up made (the catalog, compiled kernels, SQLAlchemy's metadata, the app) lives
      as long as the process: frozen out of the collector's sight, a full collection walks only
      what requests and reconcilers keep (at 500 agents: 19-80 ms pauses, not 160-360 ms);
    - a full collection at most every 100 gen-1 collections, not 10 (each still walks ~100,000
      objects, ~60-130 ms here: one a minute, not one every ~14 s; the cyclic garbage it frees
      is ~100-1,600 objects a time);
    - a young collection every 20,000 allocations, not 700: the thousand held long polls keep
      tens of thousands of young objects alive, which each young collection walks again (at
      700, 15-42 ms gen-1 pauses every 3-5 s at 1,000 agents, the heartbeat p99 ~57-59 ms; at
      20,000 ~17-21 ms; the cyclic garbage is ~60 objects a second: docs/benchmarks/agents.md)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 10, 100)


def _settings(
    host: str | None, port: int | None, data_dir: Path | None, backend: str | None = None
) -> Settings:
    """Settings from the environment with the given flags on top; errors as one line."""
    from cardhour.settings import Settings

    flags: dict[str, Any] = {"host": host, "port": port, "data_dir": data_dir, "backend": backend}
    try:
        return Settings(**{k: v for k, v in flags.items() if v is not None})
    except ValidationError as exc:
        raise invalid_setting(exc) from exc
    except SettingsError as exc:
        raise InvalidInput(str(exc)) from exc


def _listen(host: str, port: int) -> socket.socket:
    """Bind and listen now, so port 0 resolves to a real port before the banner names it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


def _interrupt(_sig: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _url(host: str, port: int) -> str:
    """A URL a local client can use: wildcard addresses become loopback."""
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def _command_name() -> str:
    """`cardhour` when that is on PATH, else the path this process was started as."""
    own = Path(sys.argv[0]).resolve()
    found = shutil.which("cardhour")
    if found and Path(found).resolve() == own:
        return "cardhour"
    with contextlib.suppress(ValueError):
        return str(own.relative_to(Path.cwd()))
    return str(own)


def _banner(
    url: str, email: str, password: str, data_dir: Path, demo: list[tuple[str, str]]
) -> None:
    cmd = _command_name()
    lines = [
        f"cardhour is up at {url}",
        f"  console   {url}/",
        f"  API docs  {url}/api/docs",
        f"  admin     {email}  password: {password}",
        f"  data      {data_dir.resolve()}",
        *(f"  app       {slug}: {outcome}  {url}/apps" for slug, outcome in demo),
        "",
        "Try it from another terminal:",
        f"  {cmd} signup --url {url}",
        f"  {cmd} offers --gpu H100:8 --url {url}",
        f"  {cmd} launch --gpu H100:1 --name demo --url {url}",
        f"  {cmd} status --url {url}",
        f"  {cmd} down demo --url {url}",
        f"  {cmd} apps list --url {url}",
        "",
        "Press Ctrl-C to stop.",
    ]
    typer.echo("\n".join(lines))  # click.echo flushes: a pipe sees the banner at once
