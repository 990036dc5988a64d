"""One replica as a local process: the version's package unpacked once, the runner
(`runner.py`) started in it with none of the platform's environment, its port read, the process
stopped; and which requirements the platform's Python lacks (a replica uses its packages).

Every failure to start is `core.errors.Unavailable`, naming the version (and its log).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from cardhour.core.errors import Unavailable
from cardhour.core.replicas import AppSpec, Placed


@dataclass
class Replica:
    """A running replica; `in_flight` and `last_used` change under its pool's lock."""

    process: subprocess.Popen[bytes]
    port: int
    in_flight: int = 0
    last_used: float = 0.0  # clock timestamp
    placed: Placed | None = None


def missing(requirements: Collection[str]) -> list[str]:
    """The requirements this Python lacks: not installed, or not at an `==` pinned version
    (other version specifiers are not checked)."""
    lacking = []
    for line in requirements:
        name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
        if name is None:
            continue
        try:
            have = importlib.metadata.version(name.group(0))
        except importlib.metadata.PackageNotFoundError:
            lacking.append(line)
            continue
        pin = re.search(r"==\s*([^,;\s]+)", line)
        if pin and pin.group(1) != have:
            lacking.append(f"{line} (installed: {have})")
    return lacking


def unpack(work_dir: Path, spec: AppSpec, lock: threading.Lock) -> Path:
    """The version's package unpacked once under `work_dir` (concurrent cold starts of one
    version wait on `lock` for one unpacking into a private folder, then a rename)."""
    folder = work_dir / spec.key.replace(":", "-")
    with lock:
        if not folder.exists():
            work_dir.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=work_dir))
            try:
                with zipfile.ZipFile(spec.package) as archive:
                    archive.extractall(tmp)
                tmp.rename(folder)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
    return folder


def spawn(
    work_dir: Path, spec: AppSpec, placed: Placed | None, lock: threading.Lock, timeout: float
) -> tuple[subprocess.Popen[bytes], int]:
    """Start the runner on the unpacked package and wait up to `timeout` for its port; the
    process and the port. Unavailable (the process killed) when it does not start."""
    try:
        folder = unpack(work_dir, spec, lock)
        log = (work_dir / f"{folder.name}.log").open("ab")
        # the app's code is not the platform's: none of its environment (database URL,
        # secrets) and not its working directory; where it was placed (simulated GPUs)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder),
               "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
        if placed is not None:
            env |= {"CARDHOUR_NODE": placed.node,
                    "CUDA_VISIBLE_DEVICES": ",".join(map(str, placed.gpus)),
                    "CARDHOUR_GPU_MILLI": str(placed.milli)}  # fmt: skip
        process = subprocess.Popen(
            [sys.executable, "-m", "cardhour.backends.apps.runner", "--dir", str(folder),
             "--entrypoint", spec.entrypoint, "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=folder,
            env=env,
        )  # fmt: skip
    except (OSError, zipfile.BadZipFile) as exc:
        raise Unavailable(f"replica of {spec.key} cannot start: {exc}") from exc
    port = read_port(process, timeout)
    if port is None:
        kill(process)
        raise Unavailable(f"replica of {spec.key} did not start (see {log.name})")
    return process, port


def read_port(process: subprocess.Popen[bytes], timeout: float) -> int | None:
    """The port the runner prints first (`port=N`), or None if it printed none in time."""
    found: list[int] = []

    def read() -> None:
        assert process.stdout is not None
        line = process.stdout.readline().decode().strip()
        if line.startswith("port="):
            found.append(int(line.removeprefix("port=")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    return found[0] if found else None


def dropped(sock: socket.socket) -> bool:
    """Whether an idle connection was closed by its peer (readable while idle: EOF)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def kill(process: subprocess.Popen[bytes]) -> None:
    """Terminate, then kill after 5 s; returns once the process is gone."""
    process.terminate()
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
