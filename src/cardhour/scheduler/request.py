"""What can be asked of the engine, and what it answers.

Request kinds (derived from the fields, see `Request.kind`):
- `cpu`: a CPU-only container (`num_gpu == 0`);
- `share`: a container with a fraction of one GPU (`num_gpu == 1`, `gpu_milli < 1000`);
- `gpus`: a container with k whole GPUs on one node (`gpu_milli == 1000`);
- `node`: one whole bare-metal node, exclusive, only on an empty node (`nodes == 1`);
- `gang`: n whole nodes placed all or nothing, under the fewest IB leaves (`nodes > 1`).
For `node` and `gang`, `num_gpu` is the GPU count each node must have (0: any).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

MILLI = 1000
MAX_GANG_NODES = 128


class Kind(StrEnum):
    CPU = "cpu"
    SHARE = "share"
    GPUS = "gpus"
    NODE = "node"
    GANG = "gang"


@dataclass(frozen=True)
class Request:
    id: str
    cpu_milli: int = 0
    memory_mib: int = 0
    num_gpu: int = 0
    gpu_milli: int = 0  # per GPU; 1000 for whole GPUs
    gpu_models: frozenset[str] = frozenset()  # allowed models; empty = any
    nodes: int = 0  # > 0: whole exclusive nodes
    data_centre: str | None = None
    node: str | None = None  # only this node (where the request's volume is)
    movable: bool = False  # the defragmentation planner may move it

    def __post_init__(self) -> None:
        if min(self.cpu_milli, self.memory_mib, self.num_gpu, self.gpu_milli, self.nodes) < 0:
            raise ValueError(f"request {self.id}: negative amounts")
        if self.nodes > MAX_GANG_NODES:
            raise ValueError(f"request {self.id}: at most {MAX_GANG_NODES} nodes")
        if self.nodes:
            return
        if self.num_gpu == 0 and self.gpu_milli:
            raise ValueError(f"request {self.id}: gpu_milli without GPUs")
        if self.num_gpu and not 0 < self.gpu_milli <= MILLI:
            raise ValueError(f"request {self.id}: gpu_milli must be in 1..1000")
        if self.num_gpu > 1 and self.gpu_milli != MILLI:
            raise ValueError(f"request {self.id}: only one GPU can be shared")

    @property
    def kind(self) -> Kind:
        if self.nodes == 1:
            return Kind.NODE
        if self.nodes > 1:
            return Kind.GANG
        if self.num_gpu == 0:
            return Kind.CPU
        return Kind.SHARE if self.gpu_milli < MILLI else Kind.GPUS

    @property
    def gpu_total_milli(self) -> int:
        """Total milli-GPU of a container request (num_gpu × gpu_milli)."""
        return self.num_gpu * self.gpu_milli

    @property
    def tag(self) -> int | None:
        """Clustering tag: 0 for a shared GPU, k for k whole GPUs, None for CPU-only."""
        if self.num_gpu == 0 or self.nodes:
            return None
        return 0 if self.gpu_milli < MILLI else min(self.num_gpu, 8)


@dataclass(frozen=True)
class Binding:
    """Resources taken on one node: `milli` on each GPU in `gpus`."""

    node: int
    gpus: tuple[int, ...]
    milli: int
    cpu_milli: int
    memory_mib: int
    exclusive: bool = False
    tag: int | None = None


@dataclass(frozen=True)
class Placement:
    request_id: str
    bindings: tuple[Binding, ...]
    leaves: tuple[str, ...] = ()
    spines: tuple[str, ...] = ()

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(b.node for b in self.bindings)


@dataclass(frozen=True)
class Pending:
    """Why nothing fits: `reason` is one line such as "0/40 nodes: 31 insufficient GPU, 9 wrong
    model"; `counts` maps each reason to its node count."""

    reason: str
    counts: dict[str, int] = field(default_factory=dict)
