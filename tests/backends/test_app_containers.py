"""Marketplace replicas as real Podman containers (`backends.apps.container`): the app runs in
its own image as user 65534 with a read-only root, no network, CPU, memory and process limits,
none of the platform's environment; requirements come from the base image or the operator's
wheelhouse only; an app that dies at start is refused with its last log lines; replicas a
previous process left are removed, and stopping leaves nothing behind."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cardhour.backends.apps.container import LABEL_DIR, ContainerLauncher
from cardhour.backends.apps.runtime import LocalAppRuntime
from cardhour.core.apps import Resources, Scaling
from cardhour.core.clock import ManualClock
from cardhour.core.errors import Unavailable
from cardhour.core.replicas import AppSpec
from cardhour.runtime.podman import PodmanRuntime
from tests.runtime.conftest import runtime  # noqa: F401 - the session's Podman, images built

APP_BASE = "localhost/cardhour/app-python:latest"

INSIDE = """
import os, socket

def read(path):
    try:
        return open(path).read().strip()
    except OSError as exc:
        return f"error: {exc.strerror}"

def handle(request):
    import numpy  # from the base image
    out = {"uid": os.getuid(), "numpy": numpy.__version__, "cwd": os.getcwd(),
           "secret": os.environ.get("CARDHOUR_SECRET")}
    try:
        socket.create_connection(("10.255.255.1", 80), timeout=2)
        out["network"] = "reachable"
    except OSError as exc:
        out["network"] = exc.strerror
    try:
        open("/app/written", "w")
        out["root"] = "writable"
    except OSError as exc:
        out["root"] = exc.strerror
    cg = "/sys/fs/cgroup"
    v2 = os.path.exists(f"{cg}/cgroup.controllers")
    out["memory"] = read(f"{cg}/memory.max" if v2 else f"{cg}/memory/memory.limit_in_bytes")
    out["cpu"] = read(f"{cg}/cpu.max") if v2 else (
        read(f"{cg}/cpu/cpu.cfs_quota_us") + " " + read(f"{cg}/cpu/cpu.cfs_period_us"))
    out["pids"] = read(f"{cg}/pids.max" if v2 else f"{cg}/pids/pids.max")
    return out
"""


def _zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def _spec(tmp_path: Path, key: str, code: str, requirements: tuple[str, ...] = ()) -> AppSpec:
    package = _zip(tmp_path / f"{key.replace(':', '-')}.zip", {"app.py": code})
    scaling = Scaling(min_replicas=0, max_replicas=2, target_concurrency=1, idle_seconds=60)
    return AppSpec(key, package, "app:handle", scaling, requirements, Resources(memory_gb=1))


def _wheel(folder: Path, name: str, version: str, code: str) -> None:
    """A pure-Python wheel of one module, as pip builds them."""
    folder.mkdir(exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": code,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }

    def digest(text: str) -> str:
        raw = hashlib.sha256(text.encode()).digest()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    record = [f"{n},sha256={digest(t)},{len(t.encode())}" for n, t in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    _zip(folder / f"{name}-{version}-py3-none-any.whl", files)


@pytest.fixture
def launcher(runtime: PodmanRuntime, tmp_path: Path) -> Iterator[ContainerLauncher]:  # noqa: F811
    wheels = tmp_path / "wheels"
    _wheel(wheels, "tinylib", "1.0", "VALUE = 'from the wheelhouse'\n")
    made = ContainerLauncher(runtime, tmp_path / "work", APP_BASE, wheels, start_timeout=30)
    yield made
    made.stop_all()
    assert runtime.list({LABEL_DIR: made.dir_label}) == []
    assert not made._sockets.exists()  # nothing left in /run


@pytest.fixture
def replicas(launcher: ContainerLauncher) -> Iterator[LocalAppRuntime]:
    """The marketplace's runtime on `launcher`; every replica stopped afterwards."""
    made = LocalAppRuntime(launcher, ManualClock(), start_timeout=30)
    yield made
    made.stop_all()


def test_a_replica_is_a_locked_down_container(
    replicas: LocalAppRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARDHOUR_SECRET", "database-password")
    rt = replicas
    spec = _spec(tmp_path, "lockdown:1", INSIDE)
    result = rt.call(spec, {})
    assert result.status == 200, result.body
    body = result.body
    assert body["uid"] == 65534 and body["cwd"] == "/app"
    assert body["secret"] is None  # none of the platform's environment
    assert body["network"] == "Network is unreachable"  # --network none
    assert body["root"] == "Read-only file system"
    assert body["memory"] == str(1024**3)  # resources.memory_gb
    assert body["cpu"].split() == ["100000", "100000"]  # one core: REPLICA_CPU_MILLI
    assert body["pids"] == "256"
    assert isinstance(rt.endpoint("lockdown:1"), str)  # a Unix socket, no port
    rt.stop_all()
    assert rt.replicas("lockdown:1") == 0


def test_requirements_come_from_the_base_image_or_the_wheelhouse(
    launcher: ContainerLauncher, replicas: LocalAppRuntime, tmp_path: Path
) -> None:
    assert launcher.missing(["numpy", "tinylib==1.0", "tinylib==2.0", "absent"]) == [
        "tinylib==2.0 (installed: 1.0)",
        "absent",
    ]
    rt = replicas
    code = "import tinylib\n\ndef handle(request):\n    return {'value': tinylib.VALUE}\n"
    spec = _spec(tmp_path, "wheels:1", code, ("tinylib==1.0", "numpy"))
    result = rt.call(spec, {})
    assert (result.status, result.body) == (200, {"value": "from the wheelhouse"})
    lacking = _spec(tmp_path, "lacking:1", code, ("absent",))
    with pytest.raises(Unavailable, match="requirements absent are not available here"):
        rt.call(lacking, {})


def test_an_app_that_dies_at_start_is_refused_with_its_last_lines(
    launcher: ContainerLauncher,
    replicas: LocalAppRuntime,
    runtime: PodmanRuntime,  # noqa: F811
    tmp_path: Path,
) -> None:
    spec = _spec(tmp_path, "crash:1", "raise RuntimeError('no model file at import')\n")
    with pytest.raises(Unavailable, match="(?s)exited: .*RuntimeError: no model file at import"):
        replicas.call(spec, {})
    assert runtime.list({LABEL_DIR: launcher.dir_label}) == []  # nothing left running


def test_replicas_a_previous_process_left_are_removed(
    launcher: ContainerLauncher,
    replicas: LocalAppRuntime,
    runtime: PodmanRuntime,  # noqa: F811
    tmp_path: Path,
) -> None:
    spec = _spec(tmp_path, "orphan:1", "def handle(request):\n    return {}\n")
    assert replicas.call(spec, {}).status == 200
    (left,) = runtime.list({LABEL_DIR: launcher.dir_label})
    # the platform died without stopping it; the next one on the same data dir starts
    ContainerLauncher(runtime, tmp_path / "work", APP_BASE)
    assert runtime.inspect(left.name) is None
