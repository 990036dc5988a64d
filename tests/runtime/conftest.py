"""Real Podman for the runtime tests: the images are built (offline, cached: under 1 s when up
to date) once per session, podman is installed when missing, nothing is mocked.

Every test names what it makes through `names` / `volumes`, which remove them in teardown.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cardhour.runtime.base import LABEL_HOST
from cardhour.runtime.cdi import (
    DEFAULT_FOLDER,
    StandinGpu,
    remove_standin_spec,
    standin_kind,
    write_standin_spec,
)
from cardhour.runtime.podman import PodmanRuntime

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "scripts" / "containers.conf"
BASE = "localhost/cardhour/base:bookworm"
PYTORCH = "localhost/cardhour/pytorch-2.3-cuda12.3:latest"
CRASH = "localhost/cardhour/crash:latest"
#: the stand-in GPUs of this session's "host" (4 of them; UUIDs as nvidia-smi prints them)
GPUS = tuple(StandinGpu(i, f"GPU-{i:08x}-0000-4000-8000-00000000cafe", "H100") for i in range(4))


@pytest.fixture(scope="session")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PodmanRuntime]:
    """Podman with the project's containers.conf, the images built."""
    if shutil.which("podman") is None or shutil.which("mmdebstrap") is None:
        packages = ["podman", "runc", "mmdebstrap", "catatonit"]
        subprocess.run([REPO / "scripts" / "apt-install-quietly.sh", *packages], check=True)
    env = {**os.environ, "CONTAINERS_CONF": str(CONF)}
    subprocess.run([REPO / "scripts" / "images.sh"], check=True, env=env, timeout=900)
    rt = PodmanRuntime(conf=CONF, entrypoint_dir=tmp_path_factory.mktemp("runtime"))
    assert rt.available()
    yield rt


@pytest.fixture(scope="session")
def host_label() -> dict[str, str]:
    """The host label of this session's containers (unique per session and xdist worker)."""
    return {LABEL_HOST: f"pytest-{os.getpid()}"}


@pytest.fixture
def names(runtime: PodmanRuntime) -> Iterator[Callable[[], str]]:
    """Makes unique container names (`ch-t<hex>-1`); removes those containers afterwards."""
    made: list[str] = []

    def make() -> str:
        made.append(f"ch-t{uuid.uuid4().hex[:10]}-1")
        return made[-1]

    yield make
    for name in made:
        runtime.remove(name)


@pytest.fixture
def volumes(runtime: PodmanRuntime) -> Iterator[Callable[[], str]]:
    """Makes unique volume names; removes those volumes afterwards (after `names`' containers:
    request `names` first)."""
    made: list[str] = []

    def make() -> str:
        made.append(f"ch-tvol-{uuid.uuid4().hex[:10]}")
        return made[-1]

    yield make
    for name in made:
        subprocess.run(
            [runtime.binary, "volume", "rm", "--force", name],
            env={**os.environ, "CONTAINERS_CONF": str(CONF)},
            capture_output=True,
            check=True,
        )


@pytest.fixture(scope="session")
def standin_kind_here() -> Iterator[str]:
    """The CDI kind of this session's stand-in GPUs (`GPUS`), its spec removed afterwards."""
    kind = standin_kind(f"pytest-{os.getpid()}")
    write_standin_spec(DEFAULT_FOLDER, kind, GPUS)
    yield kind
    remove_standin_spec(DEFAULT_FOLDER, kind)


def wait_for(probe: Callable[[], object], timeout: float = 10.0, every: float = 0.05) -> None:
    """Poll `probe` until it is truthy; AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout} s waiting for {probe}")
        time.sleep(every)
