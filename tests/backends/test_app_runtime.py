"""Marketplace replicas as local processes (`backends.apps.runtime`): concurrent cold starts of
one version share one unpacking; an app that prints a lot does not stall; the replica gets none
of the platform's environment; scale-down stops idle replicas."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
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
