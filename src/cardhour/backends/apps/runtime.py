"""Replicas of marketplace apps, one HTTP endpoint each, started by a `Launcher`:
`LocalAppRuntime` implements `core.replicas.AppRuntime` for the gateway.

Launchers: `hosts.HostLauncher` (with the hosts backend: each replica a container on the host
its share of the fleet was placed on, with exactly the GPUs placed, run by that host's agent
and called through the agent's proxy), `container.ContainerLauncher` (the other backends'
default: each replica a container of the app's own image on the control plane's machine, with
a read-only root, no network, a Unix socket the gateway calls it on, CPU, memory and process
limits) and `process.ProcessLauncher` (a local process of the platform's user and Python: no
sandbox, for reviewed apps and the gateway's tests). On the last two, GPUs are not attached: a
replica's share is recorded by the `Placer`, and its GPUs only named to it (`CARDHOUR_NODE`,
`CUDA_VISIBLE_DEVICES`).

Per app version it keeps between `min_replicas` and `max_replicas`
replicas (`min_replicas` is kept when scaling down; replicas start with calls):
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
from typing import Any, Protocol

from cardhour.backends.apps.calls import Address, NotConnected, connection, dropped, headers_for
from cardhour.core.clock import Clock
from cardhour.core.errors import Overloaded, Unavailable
from cardhour.core.replicas import AppSpec, CallResult, Placed, Placer

log = logging.getLogger("cardhour.apps")


class Launcher(Protocol):
    """Starts and stops single replicas; the handle it returns is its own business."""

    def prepare(self, spec: AppSpec) -> None:
        """Do the work done once per version (unpacking, an image build), so that starts are
        quick; nothing when done. The runtime holds the version's lock. Raises
        `core.errors.Unavailable`."""
        ...

    def start(self, spec: AppSpec, placed: Placed | None) -> tuple[Any, Address]:
        """Start one replica of a prepared `spec` and wait until it answers (at most the
        launcher's start timeout); its handle and address. Raises `core.errors.Unavailable`,
        having stopped what it started."""
        ...

    def alive(self, handle: Any) -> bool:
        """Whether the replica still runs (cheap: asked on every call)."""
        ...

    def stop(self, handle: Any) -> None:
        """Stop it and wait until it is gone; stopping a gone replica does nothing."""
        ...

    def missing(self, requirements: Collection[str]) -> list[str]:
        """The requirements replicas started here would lack."""
        ...

    def stop_all(self) -> None:
        """Stop whatever replicas of this launcher still run (shutdown)."""
        ...


@dataclass
class Replica:
    """A running replica; `in_flight` and `last_used` change under its pool's lock."""

    handle: Any  # the launcher's
    address: Address
    in_flight: int = 0
    last_used: float = 0.0  # clock timestamp
    placed: Placed | None = None


@dataclass
class _Pool:
    spec: AppSpec
    replicas: list[Replica] = field(default_factory=list)
    starting: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    prepare_lock: threading.Lock = field(default_factory=threading.Lock)


class LocalAppRuntime:
    """`core.replicas.AppRuntime` with replicas started by `launcher` on this machine (module
    docstring); thread-safe: calls, the apps reconciler and shutdown run on different
    threads."""

    def __init__(
        self,
        launcher: Launcher,
        clock: Clock,
        start_timeout: float = 30.0,
        placer: Placer | None = None,
    ) -> None:
        """`start_timeout`: how long a call waits for another call's cold start (the launcher
        bounds its own). `placer`: where replicas go on the fleet (None: nowhere)."""
        self.launcher = launcher
        self.clock = clock
        self.start_timeout = start_timeout
        self.placer = placer
        self._pools: dict[str, _Pool] = {}
        self._lock = threading.Lock()
        self._conns = threading.local()
        self._stops = 0  # replicas stopped so far

    def call(self, spec: AppSpec, payload: dict[str, Any]) -> CallResult:
        """The replica's answer, whatever its status (an answer that is not JSON becomes
        `{"error": <its first 500 bytes>}`). Overloaded or Unavailable as the module docstring
        says; a request once sent is never sent again (the app may have run). A replica that
        cannot be connected to (refused, or its host silent: nothing was sent) is stopped, on
        a thread of its own, and the call goes to another, once."""
        body = json.dumps(payload).encode()
        for attempt in (1, 2):
            replica = self._acquire(spec)
            started = time.perf_counter()
            try:
                status, raw = self._post(replica.address, body)
                break
            except (ConnectionRefusedError, NotConnected) as exc:
                self._drop(spec, replica)
                if attempt == 2:
                    raise Unavailable(f"the replica did not answer: {exc}") from exc
            except (OSError, http.client.HTTPException) as exc:
                raise Unavailable(f"the replica did not answer: {exc}") from exc
            finally:
                pool = self._pools[spec.key]
                with pool.lock:
                    replica.in_flight -= 1
                    replica.last_used = self.clock.now().timestamp()
        ms = int((time.perf_counter() - started) * 1000)
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = {"error": raw[:500].decode(errors="replace")}
        return CallResult(status, answer, ms)

    def _drop(self, spec: AppSpec, replica: Replica) -> None:
        """Take a replica that cannot be connected to out of its pool and stop it meanwhile
        (only the caller that took it out stops it; stopping may wait for a host's agent)."""
        pool = self._pools[spec.key]
        with pool.lock:
            if replica not in pool.replicas:
                return
            pool.replicas.remove(replica)
        log.warning("replica at %s cannot be connected to: stopping it", replica.address)
        threading.Thread(target=self._stop, args=(replica,), name="stop-replica").start()

    def _post(self, address: Address, body: bytes) -> tuple[int, bytes]:
        """POST /invoke on a keep-alive connection of this thread's (http.client: a millisecond
        less per call than httpx here, docs/benchmarks/marketplace.md). A connection the replica
        closed while idle is opened again before sending; once the request is sent it is never
        sent again (the app may have run)."""
        conns: dict[Address, http.client.HTTPConnection] = self._conns.__dict__.setdefault(
            "by_address", {}
        )
        if self._conns.__dict__.get("stops_seen", 0) != self._stops:
            # a replica stopped since this thread looked: close connections to gone ones
            self._conns.stops_seen = self._stops
            live = {r.address for pool in list(self._pools.values()) for r in list(pool.replicas)}
            for stale in [a for a in conns if a not in live and a != address]:
                conns.pop(stale).close()
        conn = conns.get(address)
        if conn is not None and conn.sock is not None and dropped(conn.sock):
            conn.close()  # http.client connects again on request
        if conn is None:
            conn = conns[address] = connection(address)
        try:
            conn.request("POST", "/invoke", body, headers_for(address))
            reply = conn.getresponse()
            return reply.status, reply.read()
        except BaseException:
            conn.close()
            del conns[address]
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

    def endpoint(self, key: str) -> Address | None:
        """A replica's address (benchmarks call it directly to measure the gateway)."""
        pool = self._pools.get(key)
        return pool.replicas[0].address if pool and pool.replicas else None

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
                    dead = not self.launcher.alive(replica.handle)
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

    def prepare(self, spec: AppSpec) -> None:
        """Make the version's first cold start quick (`Launcher.prepare`, once per version:
        concurrent callers wait for one)."""
        with self._pool(spec).prepare_lock:
            self.launcher.prepare(spec)

    def missing(self, requirements: Collection[str]) -> list[str]:
        """The requirements the launcher's replicas would lack."""
        return self.launcher.missing(requirements)

    def stop_all(self) -> None:
        """Stop every replica and release its share (shutdown)."""
        for pool in list(self._pools.values()):
            with pool.lock:
                for replica in pool.replicas:
                    self._stop(replica)
                pool.replicas = []
        self.launcher.stop_all()

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
                    live = [r for r in pool.replicas if self.launcher.alive(r.handle)]
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
        if lacking := self.launcher.missing(spec.requirements):
            raise Unavailable(
                f"replica of {spec.key} cannot start: its requirements {', '.join(lacking)} "
                "are not available here (the operator installs them: docs/dev/marketplace.md)"
            )
        self.prepare(spec)  # an image build first: a share placed only once it is done
        placed = self.placer.place(spec.key, spec.resources) if self.placer else None
        try:
            handle, address = self.launcher.start(spec, placed)
        except BaseException:
            if placed is not None and self.placer is not None:
                self.placer.release(placed.replica_id)
            raise
        return Replica(handle, address, 0, self.clock.now().timestamp(), placed)

    def _stop(self, replica: Replica) -> None:
        self.launcher.stop(replica.handle)
        self._stops += 1  # callers' threads drop their connections to it (`_post`)
        if replica.placed is not None and self.placer is not None:
            try:
                self.placer.release(replica.placed.replica_id)
            except Exception:  # noqa: BLE001 - no heartbeat for it now: its share expires
                log.warning("releasing replica %s failed", replica.placed.replica_id, exc_info=True)
