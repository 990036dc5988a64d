"""`cardhour agent`: run the host agent on this GPU server (see `cardhour.agent`)."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from cardhour.agent.config import AgentSettings
from cardhour.agent.loop import Agent, Revoked
from cardhour.cli.common import invalid_setting
from cardhour.core.errors import InvalidInput
from cardhour.runtime.base import RuntimeFailure


def agent(
    server: Annotated[
        str | None, typer.Option("--server", help="The control plane's URL.", show_default=False)
    ] = None,
    token: Annotated[
        str | None, typer.Option("--token", help="Join token (first start only).")
    ] = None,
    state_dir: Annotated[
        Path | None, typer.Option("--state-dir", help="Credential and runtime files.")
    ] = None,
    address: Annotated[
        str | None, typer.Option("--address", help="Address renters reach published ports at.")
    ] = None,
    standin_gpus: Annotated[
        str | None,
        typer.Option("--standin-gpus", help="TEST MACHINES ONLY: fake GPUs, e.g. H100:8."),
    ] = None,
) -> None:
    """Join this server to a cardhour control plane and run renters' containers on it.

    Settings also come from CARDHOUR_AGENT__* variables (e.g. CARDHOUR_AGENT__STANDIN_GPUS)."""
    given: dict[str, Any] = {
        "server": server,
        "token": token,
        "state_dir": state_dir,
        "address": address,
        "standin_gpus": standin_gpus,
    }
    try:
        settings = AgentSettings(**{k: v for k, v in given.items() if v is not None})
    except ValidationError as exc:
        raise invalid_setting(exc) from exc
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        Agent(settings).run(stop)
    except Revoked as exc:
        raise InvalidInput(f"the control plane refused this host: {exc}") from exc
    except RuntimeFailure as exc:
        raise InvalidInput(str(exc)) from exc
