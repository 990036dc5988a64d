"""Replicas of marketplace apps as local processes (`runner.py`), one HTTP port each.

This is the `sim` deployment's runtime: the app really runs (its Python code, on this host's
CPU, with the platform's Python and packages, as the platform's OS user, with none of its
environment); GPUs are not attached. It is no sandbox: run only apps you have reviewed. An app
whose manifest requirements this Python lacks does not start (`Unavailable`, naming them): the
operator installs them (the demo apps': `make install`).

Per app version it keeps between `min_replicas` and `max_replicas`
processes (`min_replicas` is kept when scaling down; replicas start with calls):
- `call` routes to the replica with the fewest calls in flight; when every replica has
  `target_concurrency` in flight (or there is none: scale from zero) it starts one more, up to
  `max_replicas`, and the call waits for it (a cold start, bounded by `start_timeout`); beyond
  that it is refused (`Overloaded`, HTTP 429). A replica that cannot start is `Unavailable` (503).
- `scale_down` stops replicas idle for `idle_seconds`, down to `min_replicas` (the autoscaler
  reconciler calls it).
"""

from __future__ import annotations

import http.client
import importlib.metadata
import json
import logging
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cardhour.backends.base import BackendError
from cardhour.core.apps import Resources, Scaling
from cardhour.core.clock import Clock

log = logging.getLogger("cardhour.apps")


class Overloaded(BackendError):
    """Every replica is busy and no more may start."""


class Unavailable(BackendError):
    """No replica could be started (or reached) in time."""


@dataclass(frozen=True)
class AppSpec:
    key: str  # "<app id>:<version>"
    package: Path  # the uploaded zip
    entrypoint: str
    scaling: Scaling
    requirements: tuple[str, ...] = ()  # the manifest's; must be installed here (`missing`)
    resources: Resources = field(default_factory=Resources)  # per replica


@dataclass(frozen=True)
class Placed:
    """Where the scheduler put a replica: `milli` of each of `gpus` on `node`."""

    replica_id: str
    node: str
    gpus: tuple[int, ...]
    milli: int


class Placer(Protocol):
    """Places a replica on the fleet before it starts and releases it after it stops
    (`services.app_replicas.ReplicaPlacer`); raises when nothing fits."""

    runtime_id: str

    def place(self, key: str, resources: Resources) -> Placed: ...

    def release(self, replica_id: str) -> None: ...


def missing(requirements: tuple[str, ...]) -> list[str]:
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


@dataclass
class Replica:
    process: subprocess.Popen[bytes]
    port: int
    in_flight: int = 0
    last_used: float = 0.0  # clock timestamp
    placed: Placed | None = None


@dataclass
class _Pool:
    spec: AppSpec
    replicas: list[Replica] = field(default_factory=list)
    starting: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    unpack_lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class CallResult:
    status: int  # the replica's HTTP status
    body: Any
    duration_ms: int


class LocalAppRuntime:
    def __init__(
        self,
        work_dir: Path,
        clock: Clock,
        start_timeout: float = 30.0,
        placer: Placer | None = None,
    ) -> None:
        """`placer`: where replicas go on the fleet (None: nowhere, they only run here)."""
        self.work_dir = work_dir
        self.clock = clock
        self.start_timeout = start_timeout
        self.placer = placer
        self._pools: dict[str, _Pool] = {}
        self._lock = threading.Lock()
        self._conns = threading.local()

    def call(self, spec: AppSpec, payload: dict[str, Any]) -> CallResult:
        replica = self._acquire(spec)
        started = time.perf_counter()
        try:
            status, raw = self._post(replica.port, json.dumps(payload).encode())
        except (OSError, http.client.HTTPException) as exc:
            raise Unavailable(f"the replica did not answer: {exc}") from exc
        finally:
            pool = self._pools[spec.key]
            with pool.lock:
                replica.in_flight -= 1
                replica.last_used = self.clock.now().timestamp()
        ms = int((time.perf_counter() - started) * 1000)
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"error": raw[:500].decode(errors="replace")}
        return CallResult(status, body, ms)

    def _post(self, port: int, body: bytes) -> tuple[int, bytes]:
        """POST /invoke on a keep-alive connection of this thread's (http.client: a millisecond
        less per call than httpx here, docs/benchmarks/marketplace.md). A connection the replica
        closed while idle is opened again before sending; once the request is sent it is never
        sent again (the app may have run)."""
        conns: dict[int, http.client.HTTPConnection] = self._conns.__dict__.setdefault(
            "by_port", {}
        )
        conn = conns.get(port)
        if conn is not None and conn.sock is not None and _dropped(conn.sock):
            conn.close()  # http.client connects again on request
        if conn is None:
            conn = conns[port] = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            conn.request("POST", "/invoke", body, {"Content-Type": "application/json"})
            reply = conn.getresponse()
            return reply.status, reply.read()
        except BaseException:
            conn.close()
            del conns[port]
            raise

    def replicas(self, key: str) -> int:
        pool = self._pools.get(key)
        return len(pool.replicas) if pool else 0

    def placed(self) -> list[Placed]:
        """Where the replicas running now were placed."""
        return [
            r.placed
            for pool in list(self._pools.values())
            for r in list(pool.replicas)
            if r.placed is not None
        ]

    def endpoint(self, key: str) -> int | None:
        """A replica's port (benchmarks call it directly to measure the gateway)."""
        pool = self._pools.get(key)
        return pool.replicas[0].port if pool and pool.replicas else None

    def scale_down(
        self, serving: Collection[str] | None = None, unplaced: Collection[str] = ()
    ) -> int:
        """Stop replicas idle for their `idle_seconds`, down to `min_replicas`; replicas whose
        process died; every replica of an app version not in `serving` (when given: a version
        rolled back, replaced or delisted); replicas whose fleet share is gone (`unplaced`,
        their ids: the capacity is no longer theirs). Returns how many were stopped."""
        now = self.clock.now().timestamp()
        doomed: list[Replica] = []
        for key, pool in list(self._pools.items()):
            retired = serving is not None and key not in serving
            with pool.lock:
                keep: list[Replica] = []
                for replica in sorted(pool.replicas, key=lambda r: -r.last_used):
                    dead = replica.process.poll() is not None
                    idle = now - replica.last_used >= pool.spec.scaling.idle_seconds
                    extra = len(keep) >= pool.spec.scaling.min_replicas
                    lost = replica.placed is not None and replica.placed.replica_id in unplaced
                    done = replica.in_flight == 0 and (retired or (idle and extra))
                    if dead or lost or done:
                        doomed.append(replica)
                    else:
                        keep.append(replica)
                pool.replicas = keep
        for replica in doomed:  # outside the locks: calls go on meanwhile
            self._stop(replica)
        return len(doomed)

    def warm(self, spec: AppSpec) -> int:
        """Start replicas until the version has `min_replicas` (counting those starting);
        how many were started. Raises like a cold start (the replicas started stay)."""
        pool = self._pool(spec)
        started = 0
        while True:
            with pool.lock:
                if len(pool.replicas) + pool.starting >= spec.scaling.min_replicas:
                    return started
                pool.starting += 1
            try:
                replica = self._start(spec)
            finally:
                with pool.lock:
                    pool.starting -= 1
            with pool.lock:
                pool.replicas.append(replica)
            started += 1

    def stop_all(self) -> None:
        for pool in list(self._pools.values()):
            with pool.lock:
                for replica in pool.replicas:
                    self._stop(replica)
                pool.replicas = []

    # -- inside ---------------------------------------------------------------------------

    def _pool(self, spec: AppSpec) -> _Pool:
        with self._lock:
            pool = self._pools.get(spec.key)
            if pool is None:
                pool = self._pools[spec.key] = _Pool(spec)
            return pool

    def _acquire(self, spec: AppSpec) -> Replica:
        """A replica with room, starting one if needed (module docstring)."""
        pool = self._pool(spec)
        target, most = spec.scaling.target_concurrency, spec.scaling.max_replicas
        deadline = time.monotonic() + self.start_timeout
        while True:
            dead: list[Replica] = []
            try:
                with pool.lock:
                    live = [r for r in pool.replicas if r.process.poll() is None]
                    dead = [r for r in pool.replicas if r not in live]
                    pool.replicas = live
                    best = min(live, key=lambda r: r.in_flight, default=None)
                    if best is not None and best.in_flight < target:
                        best.in_flight += 1
                        return best
                    may_start = len(live) + pool.starting < most
                    if may_start:
                        pool.starting += 1
                    elif not pool.starting:
                        raise Overloaded(
                            f"over capacity: {len(live)} replicas × {target} calls in flight"
                        )
            finally:
                for replica in dead:  # outside the lock; its fleet share goes with it
                    self._stop(replica)
            if may_start:
                try:
                    replica = self._start(spec)
                except BaseException:
                    with pool.lock:
                        pool.starting -= 1
                    raise
                with pool.lock:  # counted as starting until it is in the pool: never over max
                    pool.starting -= 1
                    replica.in_flight = 1
                    pool.replicas.append(replica)
                    return replica
            if time.monotonic() > deadline:  # waiting for another call's cold start
                raise Unavailable("no replica became ready in time")
            time.sleep(0.02)

    def _start(self, spec: AppSpec) -> Replica:
        if lacking := missing(spec.requirements):
            raise Unavailable(
                f"replica of {spec.key} cannot start: this platform lacks its requirements "
                f"{', '.join(lacking)} (replicas use the platform's Python packages: the "
                "operator installs them)"
            )
        placed = self.placer.place(spec.key, spec.resources) if self.placer else None
        try:
            return self._spawn(spec, placed)
        except BaseException:
            if placed is not None and self.placer is not None:
                self.placer.release(placed.replica_id)
            raise

    def _spawn(self, spec: AppSpec, placed: Placed | None) -> Replica:
        try:
            folder = self._unpack(spec)
            log = (self.work_dir / f"{folder.name}.log").open("ab")
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
        port = _read_port(process, self.start_timeout)
        if port is None:
            _kill(process)
            raise Unavailable(f"replica of {spec.key} did not start (see {log.name})")
        return Replica(process, port, 0, self.clock.now().timestamp(), placed)

    def _stop(self, replica: Replica) -> None:
        _kill(replica.process)
        if replica.placed is not None and self.placer is not None:
            try:
                self.placer.release(replica.placed.replica_id)
            except Exception:  # noqa: BLE001 - no heartbeat for it now: its share expires
                log.warning("releasing replica %s failed", replica.placed.replica_id, exc_info=True)

    def _unpack(self, spec: AppSpec) -> Path:
        """The version's package unpacked once (concurrent cold starts of one version wait for
        one unpacking into a private folder, then a rename)."""
        folder = self.work_dir / spec.key.replace(":", "-")
        with self._pool(spec).unpack_lock:
            if not folder.exists():
                self.work_dir.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=self.work_dir))
                try:
                    with zipfile.ZipFile(spec.package) as archive:
                        archive.extractall(tmp)
                    tmp.rename(folder)
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
        return folder


def _read_port(process: subprocess.Popen[bytes], timeout: float) -> int | None:
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


def _dropped(sock: socket.socket) -> bool:
    """Whether an idle connection was closed by its peer (readable while idle: EOF)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _kill(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
