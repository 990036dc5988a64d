"""The contract between the marketplace and what runs its apps' replicas: value objects and two
protocols, pure. `backends.apps.runtime.LocalAppRuntime` implements `AppRuntime` (replicas as
containers or local processes); `services.marketplace.replicas.ReplicaPlacer` implements
`Placer` (a share of the fleet per replica, recorded before it starts).

What a runtime raises that a caller may see is a `core.errors` error, mapped to HTTP by the
API's one handler and shown as-is by the console: `Overloaded` (429: every replica is busy and
no more may start), `Unavailable` (503: no replica could start or answer in time), and whatever
its `Placer` raises when nothing fits (`services.marketplace.replicas.NoRoom`, 503).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cardhour.core.apps import Resources, Scaling

#: what an app image and whoever runs its replicas agree on: the user its runner runs as, and
#: the socket it listens on (a folder of the host mounted there: replicas have no network)
REPLICA_USER = "65534:65534"
REPLICA_SOCKET_DIR = "/run/cardhour"
REPLICA_SOCKET = "app.sock"
#: a call to a replica on another host carries its token in this header (the agent's proxy)
REPLICA_TOKEN_HEADER = "X-Cardhour-Replica-Token"
LABEL_BUILD = "org.cardhour.build-key"  # on an app image: what it was built from
LABEL_VERSION = "org.cardhour.app-version"  # on an app image and its replicas: the version key


def build_key(digest: str, base_labels: dict[str, str]) -> str:
    """An app image's build label: what it is built from (`digest`, the control plane's) and
    the base image it was built on (its labels, read where it is built)."""
    hashed = hashlib.sha256(digest.encode())
    hashed.update(json.dumps(sorted(base_labels.items())).encode())
    return hashed.hexdigest()[:16]


def version_key(app_id: str, version: int) -> str:
    """The key of one app version in a runtime: `<app id>:<version>`."""
    return f"{app_id}:{version}"


@dataclass(frozen=True)
class AppSpec:
    """One app version as a runtime runs it."""

    key: str  # `version_key`
    package: Path  # the uploaded zip
    entrypoint: str
    scaling: Scaling
    requirements: tuple[str, ...] = ()  # the manifest's; must be installed (`AppRuntime.missing`)
    resources: Resources = field(default_factory=Resources)  # per replica


@dataclass(frozen=True)
class Placed:
    """Where the scheduler put a replica: `milli` of each of `gpus` on `node`."""

    replica_id: str
    node: str
    gpus: tuple[int, ...]
    milli: int


def replica_env(placed: Placed | None) -> dict[str, str]:
    """A replica's whole environment: none of the platform's, a home in its `/tmp` (its root is
    read-only), and where it was placed (`placement_env`)."""
    return {"HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"} | placement_env(
        placed
    )


def placement_env(placed: Placed | None) -> dict[str, str]:
    """What a replica is told of where it was placed (its GPUs are named, not attached)."""
    if placed is None:
        return {}
    return {
        "CARDHOUR_NODE": placed.node,
        "CUDA_VISIBLE_DEVICES": ",".join(map(str, placed.gpus)),
        "CARDHOUR_GPU_MILLI": str(placed.milli),
    }


@dataclass(frozen=True)
class CallResult:
    """A replica's answer to one call, whatever its status."""

    status: int  # the replica's HTTP status
    body: Any  # its JSON, or `{"error": <the first 500 bytes>}` when it was not JSON
    duration_ms: int


class Placer(Protocol):
    """Places a replica on the fleet before it starts and releases it after it stops."""

    runtime_id: str  # whose replicas these are (heartbeats name it)

    def place(self, key: str, resources: Resources) -> Placed:
        """Record a share of `resources` for one replica of version `key`; raises a
        `CardhourError` when nothing fits."""
        ...

    def release(self, replica_id: str) -> None:
        """Give the replica's share back; releasing one already gone does nothing."""
        ...


class AppRuntime(Protocol):
    """Runs replicas of app versions and routes calls to them (thread-safe)."""

    placer: Placer | None  # None: replicas take no share of the fleet

    def call(self, spec: AppSpec, payload: dict[str, Any]) -> CallResult:
        """Send `payload` to a replica of `spec` with room, starting one when every replica is
        busy and the version may have more (the call waits for it). Raises `Overloaded`,
        `Unavailable`, or what the placer raises; never retries a call once it was sent."""
        ...

    def replicas(self, key: str) -> int:
        """How many replicas of version `key` run now."""
        ...

    def placed(self) -> list[Placed]:
        """Where the replicas running now were placed."""
        ...

    def scale_down(
        self, serving: Collection[str] | None = None, unplaced: Collection[str] = ()
    ) -> int:
        """Stop idle replicas down to `min_replicas`, dead ones, those of versions not in
        `serving` and those whose share is gone (`unplaced`); how many were stopped."""
        ...

    def warm(self, spec: AppSpec) -> int:
        """Start replicas of `spec` up to its `min_replicas`; how many were started."""
        ...

    def prepare(self, spec: AppSpec) -> None:
        """Do what every replica of `spec` needs once (an image build), so that its first cold
        start is quick; nothing when done. Raises `Unavailable` when it cannot be done."""
        ...

    def missing(self, requirements: Collection[str]) -> list[str]:
        """The requirements replicas here would lack (such a version does not start)."""
        ...

    def stop_all(self) -> None:
        """Stop every replica (shutdown)."""
        ...
