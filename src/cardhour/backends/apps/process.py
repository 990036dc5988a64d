"""Replicas as local processes (`ProcessLauncher`, a `runtime.Launcher`): the version's package
unpacked once, the runner (`runner.py`) started in it with none of the platform's environment,
its port read, the process stopped; and which requirements the platform's Python lacks (a
replica uses its packages).

No sandbox: the app runs as the platform's OS user with its Python. For apps the operator has
reviewed, and for tests of the gateway; the default runtime is `container.py`.

Every failure to start is `core.errors.Unavailable`, naming the version (and its log).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Collection
from pathlib import Path

from cardhour.core.errors import Unavailable
from cardhour.core.replicas import AppSpec, Placed, placement_env


class ProcessLauncher:
    """`runtime.Launcher` of local processes; a replica's handle is its `Popen`, its address
    its port on 127.0.0.1."""

    def __init__(self, work_dir: Path, start_timeout: float) -> None:
        self.work_dir, self.start_timeout = work_dir, start_timeout

    def prepare(self, spec: AppSpec) -> None:
        unpack(self.work_dir, spec)

    def start(self, spec: AppSpec, placed: Placed | None) -> tuple[subprocess.Popen[bytes], int]:
        return spawn(unpack(self.work_dir, spec), spec, placed, self.start_timeout)

    def alive(self, handle: subprocess.Popen[bytes]) -> bool:
        return handle.poll() is None

    def stop(self, handle: subprocess.Popen[bytes]) -> None:
        kill(handle)

    def missing(self, requirements: Collection[str]) -> list[str]:
        return missing(requirements, installed_version)

    def stop_all(self) -> None:
        """Nothing beyond the replicas the runtime stops: a process dies with the platform."""


def installed_version(name: str) -> str | None:
    """The version of distribution `name` this Python has, None when it has none."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def requirement_name(line: str) -> str | None:
    """The distribution a requirement line names (`numpy>=1.24` → `numpy`), None if none."""
    found = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
    return found.group(0) if found else None


def missing(requirements: Collection[str], installed: Callable[[str], str | None]) -> list[str]:
    """The requirements `installed` (a distribution name → its version or None) does not
    satisfy: absent, or not at an `==` pinned version (other specifiers are not checked)."""
    lacking = []
    for line in requirements:
        name = requirement_name(line)
        if name is None:
            continue
        have = installed(name)
        if have is None:
            lacking.append(line)
            continue
        pin = re.search(r"==\s*([^,;\s]+)", line)
        if pin and pin.group(1) != have:
            lacking.append(f"{line} (installed: {have})")
    return lacking


def unpack(work_dir: Path, spec: AppSpec) -> Path:
    """The version's package unpacked once under `work_dir`, into a private folder, then
    renamed (the runtime holds the version's lock: one unpacking); Unavailable when it cannot
    be."""
    folder = work_dir / spec.key.replace(":", "-")
    if not folder.exists():
        try:
            work_dir.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=work_dir))
            try:
                with zipfile.ZipFile(spec.package) as archive:
                    archive.extractall(tmp)
                tmp.rename(folder)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        except (OSError, zipfile.BadZipFile) as exc:
            raise Unavailable(f"replica of {spec.key} cannot start: {exc}") from exc
    return folder


def spawn(
    folder: Path, spec: AppSpec, placed: Placed | None, timeout: float
) -> tuple[subprocess.Popen[bytes], int]:
    """Start the runner on the unpacked package `folder` and wait up to `timeout` for its
    port; the process and the port. Unavailable (the process killed) when it does not start."""
    try:
        log = folder.with_name(f"{folder.name}.log").open("ab")
        # the app's code is not the platform's: none of its environment (database URL,
        # secrets) and not its working directory; where it was placed (simulated GPUs)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder),
               "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
        env |= placement_env(placed)
        process = subprocess.Popen(
            [sys.executable, "-m", "cardhour.backends.apps.runner", "--dir", str(folder),
             "--entrypoint", spec.entrypoint, "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=folder,
            env=env,
        )  # fmt: skip
    except OSError as exc:
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


def kill(process: subprocess.Popen[bytes]) -> None:
    """Terminate, then kill after 5 s; returns once the process is gone."""
    process.terminate()
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
