"""The backend contract. Reconcilers call these outside any transaction.

Every call is idempotent by the deterministic `external_name` (`ch-<instance>-<attempt>`):
`launch` of a name that exists does nothing, unless its spec lists other nodes (the platform
replaced failed ones, and the placement's `attempt` moved on: the backend brings up the new
nodes and releases the ones left out; a launch for an older attempt than it holds, from a
worker whose claim went stale, is ignored). A name stays the same across such replacements;
`<attempt>` in it is the placement that first launched it.
`terminate` of a name that is gone returns silently.
Backends raise only the typed signals below.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from cardhour.core.storage.volumes import Attachment
from cardhour.core.topology import NodeSpec


class BackendError(Exception):
    """The backend could not be reached or refused the call; retry later."""


class ProvisioningFailed(BackendError):
    """The workload cannot come up; the instance fails."""


class ProbeUnavailable(BackendError):
    """The workload cannot run a readiness probe (its image lacks the tool, e.g. nccl-tests'
    `all_reduce_perf`): the check is recorded as not measured, and no node is blamed."""


@dataclass(frozen=True)
class WeightsMount:
    """Model weights the workload mounts read-only at `mount`; with `copy_seconds` > 0 they
    are not cached in the node's data centre and are copied in first (the estimate), so the
    workload is up only once they are there."""

    id: str
    mount: str
    copy_seconds: int = 0


@dataclass(frozen=True)
class LaunchSpec:
    external_name: str
    gpu_model: str
    gpu_count: int
    gpus_by_node: dict[str, list[int]]
    image: str  # the catalog image's id, or the renter's own OCI reference
    ssh_key: str | None  # the whole `authorized_keys`: the account's keys and the launch key
    exclusive: bool = False  # bare metal: nothing else may share its nodes
    weights: WeightsMount | None = None
    attempt: int = 0  # the placement: a launch for an older one than the backend has is ignored
    command: str | None = None  # the renter's command (`sh -c`); None: the container idles
    env: tuple[tuple[str, str], ...] = ()  # the renter's environment variables, in order
    ports: tuple[int, ...] = ()  # container ports the renter asked to publish
    instance_name: str = ""  # the renter's name: a cluster's hostnames (`core.cluster`)
    node_order: tuple[str, ...] = ()  # a cluster's nodes by rank (`core.cluster.layout`)
    volumes: tuple[Attachment, ...] = ()  # the renter's volumes, mounted read-write
    #: where a stop keeps the container's disk (a single node's), and a start finds it
    disk: str | None = None
    #: a start moving the kept disk: its image on the host it is copied from (the move's
    #: source; `disk` names it on the host placed)
    disk_from: str | None = None


class MachineState(StrEnum):
    PROVISIONING = "provisioning"
    RUNNING = "running"
    FAILED = "failed"
    GONE = "gone"


@dataclass(frozen=True)
class PollResult:
    """`connection` (JSON, shown to the owner as the backend wrote it) carries what the API
    derives its reachability from: `host`, `port` (default 22) and `user` (default root) of
    the head's sshd (the instance's `ssh`), `hosts` (node → address, a cluster's nodes) and
    `published` (container port as a string → "host:port" where it is reachable, for the
    spec's `ports`; the instance's `published`). The rest are the backend's own notes."""

    state: MachineState
    connection: dict[str, Any] = field(default_factory=dict)
    message: str = ""


class Backend(ABC):
    name: str

    @abstractmethod
    def sync_inventory(self) -> list[NodeSpec]:
        """The nodes this backend can place on, as they are now."""

    @abstractmethod
    def launch(self, spec: LaunchSpec) -> None:
        """Start bringing up `spec`; returns at once. A name already launched is left as it is,
        but for nodes replaced (the module docstring)."""

    @abstractmethod
    def poll(self, external_name: str) -> PollResult:
        """Where the workload stands; `GONE` if the backend has nothing of that name."""

    @abstractmethod
    def terminate(self, external_name: str) -> None:
        """Release everything of that name. Silent if it does not exist."""

    def stop(self, external_name: str) -> None:
        """Release the workload's GPUs, keeping its disk where the backend can (`poll` then
        says `gone` with `disk_host` in its connection). This default keeps nothing: it is
        `terminate`."""
        self.terminate(external_name)

    def started(self, external_name: str) -> None:
        """The platform recorded the workload running: what an earlier placement of the same
        instance kept for it (a stopped workload's disk, now in use) may go. Default: a
        backend that keeps no disk has nothing to let go."""
        return None

    def let_go_disk(self, external_name: str) -> None:
        """The instance whose latest workload this is was terminated: release every disk its
        stops kept. This default keeps none (`stop` is `terminate`)."""
        self.terminate(external_name)

    def remove_volume(self, volume_id: str, host: str, store: str | None) -> bool:
        """Remove a deleted volume's data from `host` (its image on the shared `store`, or in
        the host's own folder); True once it is gone, False while it is being removed or the
        host cannot be reached now (asked again later). Idempotent. This default is for
        backends that keep no volume data (the simulator; Slurm mounts none)."""
        return True


class Probing(ABC):
    """Capability: read a launched workload's nodes for the readiness gate. Each call returns
    what the tool printed, in its own format (`core.hwtopo`, `core.nccl_tests` parse it), and
    raises BackendError when the node cannot be reached."""

    @abstractmethod
    def authorized_keys(self, external_name: str, node: str) -> str:
        """The `authorized_keys` the node holds for the workload's user."""

    @abstractmethod
    def topology(self, external_name: str, node: str) -> tuple[str, str | None]:
        """(`nvidia-smi topo -m`, `ibstat` or None where the node has no InfiniBand)."""

    @abstractmethod
    def lost_nodes(self, external_name: str) -> dict[str, str]:
        """Nodes of the workload that are down or unreachable (node → why); empty when all are
        up or the workload is unknown. Polled for running instances (`reconcilers.health`)."""

    @abstractmethod
    def all_reduce(self, external_name: str, nodes: list[str], gpus_per_node: int) -> str:
        """nccl-tests `all_reduce_perf -b 8 -e 8G -f 2` over `gpus_per_node` GPUs of each of
        `nodes` (one node: NVLink/PCIe inside it; several: across the fabric)."""
