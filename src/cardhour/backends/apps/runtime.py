"""Replicas of marketplace apps as local processes (`process.py`, `runner.py`), one HTTP port
each: `LocalAppRuntime` implements `core.replicas.AppRuntime`.

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
  that it is refused (`core.errors.Overloaded`, HTTP 429). A replica that cannot start or does
  not answer is `core.errors.Unavailable` (503).
- `scale_down` stops replicas idle for `idle_seconds` (by the injected clock), down to
  `min_replicas` (the apps reconciler calls it).
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cardhour.backends.apps import process as proc
from cardhour.backends.apps.process import Replica
from cardhour.core.clock import Clock
from cardhour.core.errors import Overloaded, Unavailable
from cardhour.core.replicas import AppSpec, CallResult, Placed, Placer

log = logging.getLogger("cardhour.apps")


@dataclass
class _Pool:
    spec: AppSpec
    replicas: list[Replica] = field(default_factory=list)
    starting: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    unpack_lock: threading.Lock = field(default_factory=threading.Lock)


class LocalAppRuntime:
    """`core.replicas.AppRuntime` with replicas as local processes (module docstring);
    thread-safe: calls, the apps reconciler and shutdown run on different threads."""

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
        """The replica's answer, whatever its status (an answer that is not JSON becomes
        `{"error": <its first 500 bytes>}`). Overloaded or Unavailable as the module docstring
        says; a request once sent is never sent again (the app may have run)."""
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
        if conn is not None and conn.sock is not None and proc.dropped(conn.sock):
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
        """How many replicas of version `key` run now."""
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

    def missing(self, requirements: Collection[str]) -> list[str]:
        """The requirements this Python lacks (`process.missing`): replicas use its packages."""
        return proc.missing(requirements)

    def stop_all(self) -> None:
        """Stop every replica and release its share (shutdown)."""
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
        if lacking := proc.missing(spec.requirements):
            raise Unavailable(
                f"replica of {spec.key} cannot start: this platform lacks its requirements "
                f"{', '.join(lacking)} (replicas use the platform's Python packages: the "
                "operator installs them)"
            )
        placed = self.placer.place(spec.key, spec.resources) if self.placer else None
        try:
            process, port = proc.spawn(
                self.work_dir, spec, placed, self._pool(spec).unpack_lock, self.start_timeout
            )
        except BaseException:
            if placed is not None and self.placer is not None:
                self.placer.release(placed.replica_id)
            raise
        return Replica(process, port, 0, self.clock.now().timestamp(), placed)

    def _stop(self, replica: Replica) -> None:
        proc.kill(replica.process)
        if replica.placed is not None and self.placer is not None:
            try:
                self.placer.release(replica.placed.replica_id)
            except Exception:  # noqa: BLE001 - no heartbeat for it now: its share expires
                log.warning("releasing replica %s failed", replica.placed.replica_id, exc_info=True)
