"""Marketplace replicas as local processes (`backends.apps.runtime`): concurrent cold starts of
one version share one unpacking; an app that prints a lot does not stall; the replica gets none
of the platform's environment; scale-down stops idle replicas."""

from __future__ import annotations

import json
import threading
import time
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cardhour.backends.apps.process import ProcessLauncher
from cardhour.backends.apps.runtime import LocalAppRuntime
from cardhour.core.apps import Scaling
from cardhour.core.clock import ManualClock
from cardhour.core.replicas import AppSpec

APP = """
import os

def handle(request):
    print("x" * 100_000)  # a chatty app: its prints must not fill a pipe nobody reads
    return {"n": request["n"], "secret": os.environ.get("CARDHOUR_SECRET"), "cwd": os.getcwd()}
"""


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[tuple[LocalAppRuntime, ManualClock]]:
    clock = ManualClock()
    rt = LocalAppRuntime(ProcessLauncher(tmp_path / "replicas", 30), clock, start_timeout=30)
    yield rt, clock
    rt.stop_all()


def _spec(tmp_path: Path, replicas: int) -> AppSpec:
    package = tmp_path / "app.zip"
    with zipfile.ZipFile(package, "w") as z:
        z.writestr("app.py", APP)
    scaling = Scaling(min_replicas=0, max_replicas=replicas, target_concurrency=1, idle_seconds=60)
    return AppSpec("app1:1", package, "app:handle", scaling)


def test_cold_starts_at_once_chatty_app_clean_environment(
    runtime: tuple[LocalAppRuntime, ManualClock], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt, clock = runtime
    monkeypatch.setenv("CARDHOUR_SECRET", "database-password")
    spec = _spec(tmp_path, replicas=4)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda n: rt.call(spec, {"n": n}), range(4)))
    assert sorted(r.body["n"] for r in results) == [0, 1, 2, 3]
    assert all(r.status == 200 for r in results)
    assert 1 <= rt.replicas("app1:1") <= 4
    for n in range(10):  # 1 MB of prints through one replica
        assert rt.call(spec, {"n": n}).status == 200
    body = rt.call(spec, {"n": 0}).body
    assert body["secret"] is None  # none of the platform's environment
    assert body["cwd"] == str(tmp_path / "replicas" / "app1-1")  # nor its working directory
    clock.advance(59)
    assert rt.scale_down() == 0
    clock.advance(1)
    assert rt.scale_down() >= 1 and rt.replicas("app1:1") == 0


class _Vanishing:
    """A `Launcher` of in-process HTTP replicas on loopback ports, one of which can vanish
    (its port closed while `alive` still says yes: a host's agent restarting, a host powered
    off)."""

    def __init__(self) -> None:
        self.servers: list[ThreadingHTTPServer] = []
        self.stopped: list[int] = []

    def prepare(self, spec: AppSpec) -> None:
        pass

    def start(self, spec: AppSpec, placed: object) -> tuple[int, int]:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.servers.append(server)
        return len(self.servers) - 1, int(server.server_address[1])

    def vanish(self, index: int) -> None:
        self.servers[index].shutdown()
        self.servers[index].server_close()

    def alive(self, handle: int) -> bool:
        return True

    def stop(self, handle: int) -> None:
        self.stopped.append(handle)

    def missing(self, requirements: object) -> list[str]:
        return []

    def stop_all(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()


class _Answer(BaseHTTPRequestHandler):
    """Closes each connection after its answer, so a vanished replica's port is connected to
    again (and refuses)."""

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        data = json.dumps({"port": self.server.server_address[1]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def test_a_replica_that_cannot_be_connected_to_is_stopped_and_the_call_goes_elsewhere(
    tmp_path: Path,
) -> None:
    launcher = _Vanishing()
    rt = LocalAppRuntime(launcher, ManualClock(), start_timeout=30)
    spec = _spec(tmp_path, replicas=2)
    try:
        first = rt.call(spec, {"n": 0}).body["port"]
        launcher.vanish(0)  # nothing was sent to it: the call is not lost
        second = rt.call(spec, {"n": 1})
        assert second.status == 200 and second.body["port"] != first
        assert rt.replicas(spec.key) == 1
        deadline = time.monotonic() + 10  # stopped on a thread of its own
        while launcher.stopped != [0] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert launcher.stopped == [0]
    finally:
        rt.stop_all()
