"""The server side of `bench/launch.py`: one API worker, or the reconcilers, as its own process
on the bench's database and fleet file (what production runs: several API processes and a
reconciler worker against PostgreSQL).

- `api`: a platform (no reconciler threads) serving the app with uvicorn on a socket bound with
  `SO_REUSEPORT`, so the kernel spreads the clients' connections over the workers. With
  `--path old` the launch's fit check is the pre-change one (`FullPlacement`, swapped in here,
  for the bench only): the whole fleet loaded all free and the request placed on it.
- `reconcilers`: a platform running every reconciler on its threads (`Platform.start`), as
  `cardhour up` does.
Each writes `--ready` once it serves (or runs) and stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading
from pathlib import Path
from types import FrameType

from sqlalchemy.orm import Session

from cardhour.core.errors import NoCapacity
from cardhour.platform import Platform
from cardhour.scheduler import Pending
from cardhour.services.compute import capacity, fleet, placement
from cardhour.settings import Settings


class FullPlacement:
    """The fit check before the capacity summary (commit 445f138's `instances.create`): every
    node row loaded into an all-free `FleetState`, the model shapes taken from it, and the
    request placed on it by the platform's engine (`look_ahead=False`), once per launch."""

    def __init__(self, session: Session, platform: Platform) -> None:
        self.state = fleet.load(session, platform.catalog, all_free=True).state
        self.shapes = placement.node_shapes(self.state)
        self.engine = platform.policy

    def check(
        self,
        gpu_model: str,
        count: int,
        bare_metal: bool = False,
        data_centre: str | None = None,
    ) -> None:
        request = placement.to_request(
            self.shapes, "launch", gpu_model, count, data_centre, bare_metal
        )
        ever = (
            request
            if isinstance(request, Pending)
            else self.engine.place(self.state, request, look_ahead=False)
        )
        if isinstance(ever, Pending):
            raise NoCapacity(f"no {count} × {gpu_model} can be placed on this fleet: {ever.reason}")


def use_full_placement(platform: Platform) -> None:
    """Launches in this process check the fit the pre-change way."""
    capacity.current = lambda session: FullPlacement(session, platform)  # type: ignore[assignment]


def make_platform(args: argparse.Namespace) -> Platform:
    settings = Settings(
        database_url=args.database,
        data_dir=args.data_dir,
        fleet_file=args.fleet,
        sim={"provision_seconds": 0},
    )
    return Platform(settings)


def _stop_on_sigterm(stop: threading.Event) -> None:
    def handler(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)


def serve(args: argparse.Namespace) -> None:
    import uvicorn

    from cardhour.api.app import create_app

    platform = make_platform(args)
    if args.path == "old":
        use_full_placement(platform)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(1024)
    config = uvicorn.Config(
        create_app(platform), log_level="warning", access_log=False, backlog=1024
    )
    server = uvicorn.Server(config)  # stops on SIGTERM by itself
    args.ready.touch()
    try:
        server.run(sockets=[sock])
    finally:
        platform.stop()


def reconcile(args: argparse.Namespace) -> None:
    platform = make_platform(args)
    stop = threading.Event()
    _stop_on_sigterm(stop)
    platform.start()
    args.ready.touch()
    try:
        stop.wait()
    finally:
        platform.stop()


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="bench/launch_server.py", description=__doc__.split("\n")[0])
    p.add_argument("role", choices=["api", "reconcilers"])
    p.add_argument("--database", required=True)
    p.add_argument("--fleet", type=Path, required=True)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--ready", type=Path, required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--path", choices=["new", "old"], default="new")
    args = p.parse_args(argv)
    serve(args) if args.role == "api" else reconcile(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
