"""Replicas on the hosts (`HostLauncher`, a `runtime.Launcher`): with the hosts backend, a
replica runs where the scheduler placed its share of the fleet, as a container of that host's
agent, with exactly the GPUs placed.

- **Start**: the replica is a wanted container of workload `app-<replica id>` on the placed host
  (`HostBook.want`, as an instance's are), its spec of kind `app`: the version key, the image's
  tag and build digest (`backends.apps.image`), the base image, the GPUs placed (the agent
  attaches the CDI devices of those indices, for a fraction of a GPU too), CPU
  (`core.apps.REPLICA_CPU_MILLI`) and memory (the manifest's), a process limit, the placement's
  environment, and a token made for this replica. The agent builds the image when it lacks it
  (the build context fetched from `GET /agent/app-context`, `context`), runs the container
  with a read-only root, no network, user 65534 and every capability dropped, and opens a proxy
  on its host address that lets in only calls with the token and forwards them to the
  replica's socket (`agent.apps`). It reports `running` with `probes` once `GET /healthz`
  answers through it; `start` waits for that (the launcher's start timeout), and a replica that
  fails, exits or whose host is lost is `Unavailable` with the agent's reason and last log
  lines, its container no longer wanted.
- **Calls** go to `Endpoint(host address, proxy port, token)`: the gateway's keep-alive
  connections speak TCP to the host, which must be reachable from the control plane on its
  address (as renters' SSH and ports already need).
- **Alive** reads the host book at most every `ALIVE_SECONDS` per replica (it is asked on every
  call); **stop** stops wanting the container and waits (bounded) for the agent to remove it.
- At construction, and at `stop_all`, every `app-` workload still wanted is dropped: their
  shares of the fleet lapsed with the process that placed them.

`missing` finds nothing missing: the base image is on the hosts, not here, so a requirement
neither in a host's base image nor in the wheelhouse fails that replica's build on the host,
with pip's `ERROR:` line as the reason. The first replica of a version on a host waits for
that build within the start timeout (the agent builds on its converge thread: the host's other
containers wait for it too).

Calls and the token cross the network between the control plane and the hosts as plain HTTP:
the operator's network must be trusted (TLS between them is not done).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
import zipfile
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cardhour.backends.apps import image as app_image
from cardhour.backends.apps.calls import Endpoint
from cardhour.backends.hosts.backend import HostDirectory, failure_reason
from cardhour.core.apps import REPLICA_CPU_MILLI
from cardhour.core.errors import Unavailable
from cardhour.core.hosts import EXITED, FAILED, RUNNING, HostInfo
from cardhour.core.replicas import AppSpec, Placed, replica_env

log = logging.getLogger("cardhour.apps")

PREFIX = "app-"  # an app replica's workload name: `app-<replica id>`
ALIVE_SECONDS = 2.0
STOP_SECONDS = 30.0  # how long `stop` waits for the agent to remove the container
POLL_SECONDS = 0.1
CONTEXTS = 4  # packed build contexts kept in memory


class ReplicaDirectory(HostDirectory, Protocol):
    """What the launcher needs of the database (`services.hosts.book.HostBook`)."""

    def workloads(self, prefix: str) -> list[str]: ...


@dataclass
class HostReplica:
    """A replica's handle: its workload, and when it was last seen running (monotonic)."""

    workload: str
    seen_at: float
    alive: bool = True


class HostLauncher:
    """`runtime.Launcher` of replicas on the hosts (module docstring). `base_image`: what app
    images are built from on the hosts; `wheelhouse`: the only source of requirements the base
    lacks (sent to the host in the build context)."""

    def __init__(
        self,
        directory: ReplicaDirectory,
        base_image: str,
        wheelhouse: Path | None = None,
        pids_limit: int = 256,
        start_timeout: float = 30.0,
    ) -> None:
        self.directory, self.base_image, self.wheelhouse = directory, base_image, wheelhouse
        self.pids_limit, self.start_timeout = pids_limit, start_timeout
        #: version key -> (spec, build digest), of the versions prepared here
        self._specs: dict[str, tuple[AppSpec, str]] = {}
        #: version key -> packed build context, of the last `CONTEXTS` versions fetched
        self._contexts: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self.stop_all()

    # -- the Launcher -----------------------------------------------------------------------

    def prepare(self, spec: AppSpec) -> None:
        """Check that the version's build context can be made (it is built on each host at its
        first replica there)."""
        with self._lock:
            if spec.key in self._specs:
                return
        try:
            digest = app_image.digest(spec, self.base_image)
        except OSError as exc:
            raise Unavailable(f"replica of {spec.key} cannot start: {exc}") from exc
        with self._lock:
            self._specs[spec.key] = (spec, digest)

    def start(self, spec: AppSpec, placed: Placed | None) -> tuple[HostReplica, Endpoint]:
        if placed is None:
            raise Unavailable(f"replica of {spec.key} cannot start: it was placed on no host")
        self.prepare(spec)
        workload = f"{PREFIX}{placed.replica_id}"
        token = secrets.token_urlsafe(32)
        try:
            host = self._host(placed.node)
            uuids = {int(g["index"]): str(g["uuid"]) for g in host.inventory.get("gpus", [])}
            wanted = {
                "kind": "app",
                "app": spec.key,
                "image": app_image.tag(spec),
                "build": self._specs[spec.key][1],
                "base_image": self.base_image,
                "gpus": [{"index": i, "uuid": uuids.get(i, "")} for i in placed.gpus],
                "cpus": REPLICA_CPU_MILLI / 1000,
                "memory_mb": spec.resources.memory_gb * 1024,
                "pids_limit": self.pids_limit,
                "env": replica_env(placed),
                "token": token,
            }
            self.directory.want(workload, 1, {placed.node: wanted})
            port = self._wait_ready(spec, workload, placed.node)
        except BaseException:
            self.directory.unwant(workload)
            raise
        address = host.address or host.name
        return HostReplica(workload, time.monotonic()), Endpoint(address, port, token)

    def alive(self, handle: HostReplica) -> bool:
        """Whether its container was running when last looked at (at most every
        `ALIVE_SECONDS`: a read of the host book)."""
        if handle.alive and time.monotonic() - handle.seen_at >= ALIVE_SECONDS:
            handle.seen_at = time.monotonic()
            handle.alive = any(
                c.wanted and c.state == RUNNING for c in self.directory.containers(handle.workload)
            )
        return handle.alive

    def stop(self, handle: HostReplica) -> None:
        self.directory.unwant(handle.workload)
        deadline = time.monotonic() + STOP_SECONDS
        while self.directory.containers(handle.workload) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)

    def stop_all(self) -> None:
        for workload in self.directory.workloads(PREFIX):
            log.info("dropping app replica %s: not this process's", workload)
            self.directory.unwant(workload)

    def missing(self, requirements: Collection[str]) -> list[str]:
        return []  # module docstring: what the wheelhouse lacks may be in the hosts' base image

    # -- for the agents ---------------------------------------------------------------------

    def context(self, key: str) -> bytes | None:
        """The build context of version `key` (a gzipped tar, `backends.apps.image`), when a
        replica of it was started here; None otherwise."""
        with self._lock:
            prepared, packed = self._specs.get(key), self._contexts.get(key)
        if prepared is None:
            return None
        if packed is None:  # packed once, not for every host (the wheels may be large)
            try:
                packed = app_image.packed_context(prepared[0], self.base_image, self.wheelhouse)
            except (OSError, zipfile.BadZipFile) as exc:
                raise Unavailable(f"cannot pack app version {key}: {exc}") from exc
            with self._lock:
                while len(self._contexts) >= CONTEXTS:
                    self._contexts.pop(next(iter(self._contexts)))
                self._contexts[key] = packed
        return packed

    # -- inside ------------------------------------------------------------------------------

    def _host(self, name: str) -> HostInfo:
        for host in self.directory.hosts():
            if host.name == name and host.lost is None:
                return host
        raise Unavailable(f"replica cannot start: host {name} is not reporting")

    def _wait_ready(self, spec: AppSpec, workload: str, node: str) -> int:
        """The proxy's port once the agent reports the replica answering; Unavailable when it
        fails, exits, its host is lost, or the start timeout passes."""
        deadline = time.monotonic() + self.start_timeout
        while True:
            lost = self.directory.lost_hosts_of(workload)
            if lost:
                said = "; ".join(f"{h}: {why}" for h, why in sorted(lost.items()))
                raise Unavailable(f"replica of {spec.key} cannot start: host lost ({said})")
            for c in self.directory.containers(workload):
                if not c.wanted:
                    continue
                if c.state in (FAILED, EXITED):
                    raise Unavailable(f"replica of {spec.key} did not start: {failure_reason(c)}")
                port = c.report.get("ports", {}).get("app")
                if c.state == RUNNING and "probes" in c.report and port:
                    return int(port)
            if time.monotonic() > deadline:
                raise Unavailable(f"replica of {spec.key} did not answer in time on {node}")
            time.sleep(POLL_SECONDS)
