"""The fleet as arrays: what the placement engine reads and what `assume`/`forget` change.

One row per node. GPUs are columns of `gpu_free` (milli-GPU, 1000 = one whole GPU), padded to the
widest node with zeros and `gpu_real == False`. A padded column never fits any GPU request and
adds nothing to any sum, so most code can ignore the padding.

Every change to a node bumps `version[node]`; caches (the fragmentation meter) compare versions
to recompute only the rows that changed. Memory: about 110 bytes per node plus 11 per GPU, so a
10,000-node / 80,000-GPU fleet is under 2 MB.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from cardhour.scheduler.request import Binding, Placement, Request

MILLI = 1000
# Hosted-pod tags for the clustering policy: column 0 = GPU-sharing pods, column k = k-GPU pods.
TAGS = 9


@dataclass(frozen=True)
class NodeInfo:
    """One node as the engine needs it. `domains[g]` is GPU g's NVLink/PCIe-switch domain."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpu_count: int
    gpu_model: str = ""
    domains: tuple[int, ...] = ()  # default: one domain holding every GPU
    ib_leaf: str | None = None
    ib_spine: str | None = None
    data_centre: str = ""
    schedulable: bool = True


def _index(values: Sequence[str | None]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Dense integer codes for labels; None → -1."""
    names = tuple(sorted({v for v in values if v is not None}))
    lookup = {name: i for i, name in enumerate(names)}
    codes = np.array([lookup[v] if v is not None else -1 for v in values], dtype=np.int32)
    return codes, names


@dataclass
class FleetState:
    names: tuple[str, ...]
    cpu_cap: np.ndarray
    cpu_free: np.ndarray
    mem_cap: np.ndarray
    mem_free: np.ndarray
    gpu_count: np.ndarray
    gpu_free: np.ndarray  # [N, G] milli-GPU free per GPU, 0 in padding
    gpu_real: np.ndarray  # [N, G] bool
    domain: np.ndarray  # [N, G] int16, -1 in padding
    model: np.ndarray  # [N] index into `models`, -1 for CPU-only nodes
    models: tuple[str, ...]
    leaf: np.ndarray
    leaves: tuple[str, ...]
    spine: np.ndarray
    spines: tuple[str, ...]
    dc: np.ndarray
    dcs: tuple[str, ...]
    schedulable: np.ndarray
    exclusive: np.ndarray  # held whole by a bare-metal tenant or a gang
    tags: np.ndarray  # [N, TAGS] hosted pods by tag (see TAGS)
    hosted: np.ndarray  # [N] bindings on the node (a zero-size container still occupies it)
    version: np.ndarray
    index: dict[str, int] = field(default_factory=dict)

    @classmethod
    def build(cls, nodes: Sequence[NodeInfo]) -> FleetState:
        n = len(nodes)
        width = max((node.gpu_count for node in nodes), default=0)
        gpu_count = np.array([node.gpu_count for node in nodes], dtype=np.int64)
        columns = np.arange(width)
        gpu_real = columns[None, :] < gpu_count[:, None]
        domain = np.full((n, width), -1, dtype=np.int16)
        for i, node in enumerate(nodes):
            doms = node.domains or (0,) * node.gpu_count
            if len(doms) != node.gpu_count:
                raise ValueError(f"node {node.name}: {len(doms)} domains for {node.gpu_count} GPUs")
            domain[i, : node.gpu_count] = doms
        model, models = _index([node.gpu_model or None for node in nodes])
        leaf, leaves = _index([node.ib_leaf for node in nodes])
        spine, spines = _index([node.ib_spine for node in nodes])
        dc, dcs = _index([node.data_centre for node in nodes])
        cpu = np.array([node.cpu_milli for node in nodes], dtype=np.int64)
        mem = np.array([node.memory_mib for node in nodes], dtype=np.int64)
        names = tuple(node.name for node in nodes)
        if len(set(names)) != n:
            raise ValueError("node names must be unique")
        return cls(
            names=names,
            cpu_cap=cpu,
            cpu_free=cpu.copy(),
            mem_cap=mem,
            mem_free=mem.copy(),
            gpu_count=gpu_count,
            gpu_free=np.where(gpu_real, MILLI, 0).astype(np.int64),
            gpu_real=gpu_real,
            domain=domain,
            model=model,
            models=models,
            leaf=leaf,
            leaves=leaves,
            spine=spine,
            spines=spines,
            dc=dc,
            dcs=dcs,
            schedulable=np.array([node.schedulable for node in nodes], dtype=bool),
            exclusive=np.zeros(n, dtype=bool),
            tags=np.zeros((n, TAGS), dtype=np.int32),
            hosted=np.zeros(n, dtype=np.int32),
            version=np.zeros(n, dtype=np.int64),
            index={name: i for i, name in enumerate(names)},
        )

    def __len__(self) -> int:
        return len(self.names)

    @property
    def gpu_width(self) -> int:
        return int(self.gpu_free.shape[1])

    def idle_milli(self) -> np.ndarray:
        """U_n: unallocated milli-GPU per node."""
        return self.gpu_free.sum(axis=1)

    def empty(self) -> np.ndarray:
        """Nodes with nothing on them (every GPU, CPU and byte of memory free)."""
        return (
            (self.gpu_free.sum(axis=1) == self.gpu_count * MILLI)
            & (self.cpu_free == self.cpu_cap)
            & (self.mem_free == self.mem_cap)
            & ~self.exclusive
            & (self.hosted == 0)
        )

    def node_empty(self, i: int) -> bool:
        return bool(
            self.gpu_free[i].sum() == self.gpu_count[i] * MILLI
            and self.cpu_free[i] == self.cpu_cap[i]
            and self.mem_free[i] == self.mem_cap[i]
            and not self.exclusive[i]
            and self.hosted[i] == 0
        )

    def copy(self) -> FleetState:
        """An independent copy for what-if planning (static arrays are shared)."""
        return FleetState(
            **{
                **self.__dict__,
                "cpu_free": self.cpu_free.copy(),
                "mem_free": self.mem_free.copy(),
                "gpu_free": self.gpu_free.copy(),
                "schedulable": self.schedulable.copy(),
                "exclusive": self.exclusive.copy(),
                "tags": self.tags.copy(),
                "hosted": self.hosted.copy(),
                "version": self.version.copy(),
            }
        )

    def container_placement(self, req: Request, node: int, gpus: tuple[int, ...]) -> Placement:
        """Container `req` on `node` with `gpus`, naming the node's IB leaf and spine if any."""
        binding = Binding(node, gpus, req.gpu_milli, req.cpu_milli, req.memory_mib, tag=req.tag)
        leaf, spine = self.leaf[node], self.spine[node]
        return Placement(
            req.id,
            (binding,),
            (self.leaves[leaf],) if leaf >= 0 else (),
            (self.spines[spine],) if spine >= 0 else (),
        )

    def assume(self, placement: Placement) -> None:
        """Reserve a placement's resources; ValueError (nothing changed) if it no longer fits."""
        self._check(placement)
        self._apply(placement, -1)

    def forget(self, placement: Placement) -> None:
        """Give back what `assume` reserved (a release, or a rollback inside a cycle).
        ValueError (nothing changed) if that would free more than a node has."""
        for b in placement.bindings:
            i = b.node
            gpus = list(b.gpus)
            if (
                self.hosted[i] < 1
                or self.cpu_free[i] + b.cpu_milli > self.cpu_cap[i]
                or self.mem_free[i] + b.memory_mib > self.mem_cap[i]
                or any(self.gpu_free[i, g] + b.milli > MILLI for g in gpus)
            ):
                raise ValueError(f"{self.names[i]}: {placement.request_id} is not held there")
        self._apply(placement, +1)

    def _check(self, placement: Placement) -> None:
        nodes = placement.nodes
        if len(set(nodes)) != len(nodes):
            raise ValueError(f"{placement.request_id}: one binding per node")
        for b in placement.bindings:
            i = b.node
            if self.exclusive[i]:
                raise ValueError(f"{self.names[i]} is held whole")
            if b.exclusive and not self.node_empty(i):
                raise ValueError(f"{self.names[i]} is not empty")
            if self.cpu_free[i] < b.cpu_milli or self.mem_free[i] < b.memory_mib:
                raise ValueError(f"{self.names[i]}: not enough CPU or memory")
            gpus = list(b.gpus)
            if len(set(gpus)) != len(gpus) or any(g >= self.gpu_count[i] for g in gpus):
                raise ValueError(f"{self.names[i]}: bad GPU indices {gpus}")
            if any(self.gpu_free[i, g] < b.milli for g in gpus):
                raise ValueError(f"{self.names[i]}: GPUs {gpus} lack {b.milli} milli")

    def _apply(self, placement: Placement, sign: int) -> None:
        for b in placement.bindings:
            i = b.node
            self.cpu_free[i] += sign * b.cpu_milli
            self.mem_free[i] += sign * b.memory_mib
            if b.gpus:
                self.gpu_free[i, list(b.gpus)] += sign * b.milli
            if b.exclusive:
                self.exclusive[i] = sign < 0
            self.hosted[i] -= sign
            tag = b.tag
            if tag is not None:
                self.tags[i, tag] -= sign
            self.version[i] += 1
