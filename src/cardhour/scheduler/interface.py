"""The scheduler's contract: what a snapshot, a request and a decision are.

A policy gets a `Snapshot` and a `PlacementRequest` and returns a `Placement` or an
`Unschedulable` with an aggregated reason. It never partially places a multi-node request.
`Snapshot.apply` reserves a placement on the snapshot so one cycle can place many requests.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from cardhour.core.topology import NodeSpec


@dataclass
class NodeState:
    spec: NodeSpec
    free_gpus: list[int]  # indices of whole free GPUs
    version: int = 0  # allocation version, for the optimistic guard when applying
    schedulable: bool = True

    @property
    def is_empty(self) -> bool:
        return len(self.free_gpus) == self.spec.gpu_count


@dataclass
class Snapshot:
    nodes: list[NodeState]

    def by_id(self) -> dict[str, NodeState]:
        return {n.spec.id: n for n in self.nodes}

    def apply(self, placement: Placement) -> None:
        """Reserve `placement`'s GPUs in this snapshot (within one scheduling cycle)."""
        nodes = self.by_id()
        for node_id, gpus in placement.gpus_by_node.items():
            state = nodes[node_id]
            state.free_gpus = [g for g in state.free_gpus if g not in set(gpus)]


@dataclass(frozen=True)
class PlacementRequest:
    gpu_models: tuple[str, ...]  # allowed GpuModel ids
    count: int  # whole GPUs
    data_centre: str | None = None


@dataclass(frozen=True)
class Placement:
    gpus_by_node: dict[str, list[int]]
    data_centre: str
    ib_leaves: tuple[str, ...] = ()
    ib_spines: tuple[str, ...] = ()

    @property
    def node_count(self) -> int:
        return len(self.gpus_by_node)


@dataclass(frozen=True)
class Unschedulable:
    """Why nothing fits: `reason` is one line such as "0/44 nodes: 24 wrong model, 20 busy"."""

    reason: str
    counts: dict[str, int] = field(default_factory=dict)


def summarise(total: int, rejections: Counter[str], prefix: str = "") -> Unschedulable:
    parts = ", ".join(f"{n} {why}" for why, n in rejections.most_common())
    head = f"{prefix}: " if prefix else ""
    return Unschedulable(f"{head}0/{total} nodes fit: {parts}", dict(rejections))


class Policy(Protocol):
    name: str

    def place(self, snapshot: Snapshot, request: PlacementRequest) -> Placement | Unschedulable:
        """Choose GPUs for `request`; all or nothing."""
        ...
