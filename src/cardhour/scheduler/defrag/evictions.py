"""What to evict from one node so that a request fits there once the evicted containers move.

Per node, the cheapest set of movable containers whose eviction makes room: all of them for a
whole node (a bare-metal or gang request); for k GPUs, the containers on the k cheapest GPUs to free
(a shared GPU frees only when every container on it leaves, so a fraction needs the fewest
containers whose milli covers it), then more containers while CPU or memory is short. Cost =
(containers moved, milli-GPU moved); the GPU choice is exact up to `MAX_GPU_SETS` subsets, the
CPU/memory top-up greedy.

Contract: pure — nothing here changes the `FleetState`. A node that would need an unmovable
container (`UNMOVABLE`) or an allocation not listed as running (`UNLISTED`) to go gives that
reason instead of a set; whether the evicted containers fit elsewhere is for the planner to
verify (defrag/plan.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from math import comb

from cardhour.scheduler.request import MILLI, Placement, Request
from cardhour.scheduler.state import FleetState

MAX_GPU_SETS = 128  # GPU subsets compared exactly on one node; beyond, picked greedily

UNMOVABLE = "hold unmovable containers"
UNLISTED = "hold allocations not listed as running"

Cost = tuple[int, int]  # (containers moved, milli-GPU moved)


@dataclass(frozen=True)
class Held:
    """What one running container holds on one node."""

    request: Request
    placement: Placement
    node: int
    gpus: tuple[int, ...]
    milli: int  # on each GPU in `gpus`
    cpu_milli: int
    memory_mib: int
    exclusive: bool
    movable: bool

    @property
    def moved_milli(self) -> int:
        return len(self.gpus) * self.milli


def held_by_node(
    state: FleetState, running: Sequence[tuple[Request, Placement]]
) -> dict[int, list[Held]]:
    """What each node holds of `running`, by node index. A container is movable only when its
    request is `movable` and it sits on one node (a gang member never moves)."""
    held: dict[int, list[Held]] = {}
    for req, placement in running:
        movable = req.movable and len(placement.bindings) == 1
        for b in placement.bindings:
            held.setdefault(b.node, []).append(
                Held(
                    req,
                    placement,
                    b.node,
                    b.gpus,
                    b.milli,
                    b.cpu_milli,
                    b.memory_mib,
                    b.exclusive,
                    movable,
                )
            )
    return held


def eviction_cost(evicted: Sequence[Held]) -> Cost:
    """(containers moved, milli-GPU moved): lower is cheaper, compared in that order."""
    return len(evicted), sum(h.moved_milli for h in evicted)


def evict_whole(state: FleetState, i: int, held: list[Held]) -> list[Held] | str:
    """Every container on node i, if all are movable and nothing else is allocated there."""
    if any(not h.movable for h in held):
        return UNMOVABLE
    gpu = int(state.gpu_free[i].sum()) + sum(h.moved_milli for h in held)
    cpu = int(state.cpu_free[i]) + sum(h.cpu_milli for h in held)
    mem = int(state.mem_free[i]) + sum(h.memory_mib for h in held)
    held_whole = bool(state.exclusive[i]) and not any(h.exclusive for h in held)
    full = gpu == state.gpu_count[i] * MILLI and cpu == state.cpu_cap[i]
    if held_whole or not full or mem != state.mem_cap[i]:
        return UNLISTED
    return list(held)


def evict_some(state: FleetState, i: int, held: list[Held], req: Request) -> list[Held] | str:
    """The cheapest containers to evict from node i so a container request fits there."""
    if state.exclusive[i]:
        return evict_whole(state, i, held)
    movable = [h for h in held if h.movable]
    best: list[Held] | None = None
    for chosen in _gpu_options(state, i, movable, req):
        evicted = _top_up(state, i, movable, chosen, req)
        if evicted is not None and (best is None or eviction_cost(evicted) < eviction_cost(best)):
            best = evicted
    if best is None:
        return UNMOVABLE if len(movable) < len(held) else UNLISTED
    return best


def _gpu_options(
    state: FleetState, i: int, movable: list[Held], req: Request
) -> list[frozenset[int]]:
    """Sets of `movable` indices whose eviction leaves req.num_gpu GPUs with req.gpu_milli."""
    if req.num_gpu == 0:
        return [frozenset()]
    ready = 0
    per_gpu: list[frozenset[int]] = []
    for g in range(int(state.gpu_count[i])):
        free = int(state.gpu_free[i, g])
        if free >= req.gpu_milli:
            ready += 1
            continue
        on_g = [j for j, h in enumerate(movable) if g in h.gpus]
        taken = _fewest([movable[j].milli for j in on_g], req.gpu_milli - free)
        if taken is not None:
            per_gpu.append(frozenset(on_g[t] for t in taken))
    need = req.num_gpu - ready
    if need <= 0:
        return [frozenset()]
    if len(per_gpu) < need:
        return []
    if comb(len(per_gpu), need) <= MAX_GPU_SETS:
        return list({frozenset().union(*sets) for sets in combinations(per_gpu, need)})
    union: frozenset[int] = frozenset()
    left = sorted(per_gpu, key=len)
    for _ in range(need):
        pick = min(left, key=lambda s: len(s - union))
        left.remove(pick)
        union |= pick
    return [union]


def _fewest(sizes: list[int], deficit: int) -> list[int] | None:
    """Fewest indices whose sizes sum to at least `deficit`: largest first, the last one the
    smallest that completes; None if all of them fall short."""
    order = sorted(range(len(sizes)), key=lambda j: -sizes[j])
    taken: list[int] = []
    for pos in range(len(order)):
        completing = [j for j in order[pos:] if sizes[j] >= deficit]
        if completing:
            return [*taken, min(completing, key=lambda j: sizes[j])]
        taken.append(order[pos])
        deficit -= sizes[order[pos]]
    return None


def _top_up(
    state: FleetState, i: int, movable: list[Held], chosen: frozenset[int], req: Request
) -> list[Held] | None:
    """`chosen` plus, greedily, more containers until CPU and memory suffice; None if they can't."""
    taken = set(chosen)
    cpu = int(state.cpu_free[i]) - req.cpu_milli + sum(movable[j].cpu_milli for j in taken)
    mem = int(state.mem_free[i]) - req.memory_mib + sum(movable[j].memory_mib for j in taken)
    while cpu < 0 or mem < 0:
        rest = [j for j in range(len(movable)) if j not in taken]
        scored = [(_covers(movable[j], cpu, mem), j) for j in rest]
        if not scored or max(scored)[0][0] == 0:
            return None
        j = max(scored)[1]
        taken.add(j)
        cpu += movable[j].cpu_milli
        mem += movable[j].memory_mib
    return [movable[j] for j in sorted(taken)]


def _covers(h: Held, cpu: int, mem: int) -> tuple[float, int]:
    """How much of the CPU and memory deficits (negative surpluses) evicting `h` covers, then
    the fewer milli-GPU moved the better."""
    share = min(h.cpu_milli, -cpu) / -cpu if cpu < 0 else 0.0
    share += min(h.memory_mib, -mem) / -mem if mem < 0 else 0.0
    return share, -h.moved_milli
