"""Defragmentation planner: which movable containers to move, and where, so a request fits.

`plan_defrag` is pure: it reads a `FleetState` (with the running containers already assumed on
it) and returns a `DefragPlan` or a `Pending`, changing neither the state nor any placement (it
works on copies). `apply_plan` carries a plan out on a state, for what-if checks or to bring the
scheduler's snapshot up to date once the moves have happened.

How a plan is found:
1. If the request fits as things stand, the plan has no moves.
2. Every node that could host the request once emptied (schedulable, data centre, GPU model,
   size, InfiniBand for a gang) gets the cheapest set of movable containers whose eviction makes
   room: all of them for a whole node; for k GPUs, the containers on the k cheapest GPUs to free
   (a shared GPU frees only when every container on it leaves, so a fraction needs the fewest
   containers whose milli covers it), then more containers while CPU or memory is short.
   A node that would need an unmovable container (or an allocation not listed) to go is skipped.
   Cost = (containers moved, milli-GPU moved); GPU choice is exact, the CPU/memory top-up greedy.
3. Candidates (nodes; for a gang, node sets in the fewest IB leaves, then fewest moves) are tried
   cheapest first on a copy of the state: forget the evicted containers, mark the candidate nodes
   unschedulable, re-place the evicted containers largest first with the scheduler, then the
   request itself must `place`. The first candidate that passes is the plan.

Only single-node containers marked `Request.movable` move; a gang member never does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations
from math import comb

import numpy as np

from cardhour.scheduler.engine import Scheduler
from cardhour.scheduler.filters import DataCentre, GpuModel, run_filters
from cardhour.scheduler.framework import Context
from cardhour.scheduler.gang import whole_node_binding
from cardhour.scheduler.request import MILLI, Binding, Kind, Pending, Placement, Request
from cardhour.scheduler.state import FleetState

MAX_TRIES = 64  # candidates verified (each re-places its containers) before giving up
MAX_GPU_SETS = 128  # GPU subsets compared exactly on one node; beyond, picked greedily

UNMOVABLE = "hold unmovable containers"
UNLISTED = "hold allocations not listed as running"
NOWHERE = "whose containers fit nowhere else"

Cost = tuple[int, int]  # (containers moved, milli-GPU moved)


@dataclass(frozen=True)
class Move:
    """Move container `container_id` from `from_node` to GPUs `gpus` of `to_node`."""

    container_id: str
    from_node: str
    to_node: str
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class DefragPlan:
    """Apply `moves` in order, then `request_id` fits on `target_nodes`. No moves: fits now."""

    request_id: str
    moves: tuple[Move, ...]
    target_nodes: tuple[str, ...]


@dataclass(frozen=True)
class _Held:
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


class _CouldHost:
    """Static fit of a node once emptied: big enough, or the exact size for whole nodes."""

    name = "could-host"

    def filter(self, ctx: Context, req: Request) -> Iterable[tuple[str, np.ndarray]]:
        s = ctx.state
        if req.nodes:
            if req.num_gpu:
                yield "other node size", s.gpu_count != req.num_gpu
            if req.nodes > 1:
                yield "no InfiniBand", s.leaf < 0
            return
        yield "too few GPUs per node", s.gpu_count < req.num_gpu
        yield "too little CPU", s.cpu_cap < req.cpu_milli
        yield "too little memory", s.mem_cap < req.memory_mib


class _Schedulable:
    name = "schedulable"

    def filter(self, ctx: Context, req: Request) -> Iterable[tuple[str, np.ndarray]]:
        yield "unschedulable", ~ctx.state.schedulable


_FILTERS = (_Schedulable(), DataCentre(), GpuModel(), _CouldHost())


def plan_defrag(
    state: FleetState,
    running: Sequence[tuple[Request, Placement]],
    request: Request,
    scheduler: Scheduler,
) -> DefragPlan | Pending:
    """The cheapest verified plan that makes `request` fit, or a Pending saying why none exists.

    `running` lists the containers assumed on `state` with their placements; only those whose
    request is `movable` (and that sit on one node) may move. Allocations on `state` that are not
    listed block their resources. `scheduler` chooses the targets of moved containers; its random
    generator may advance. `state` is left unchanged.
    """
    now = scheduler.place(state, request)
    if isinstance(now, Placement):
        return DefragPlan(request.id, (), _names(state, now))
    alive, counts = run_filters(Context(state, np.random.default_rng(0)), request, _FILTERS)
    held = _held_by_node(state, running)
    freeable: dict[int, list[_Held]] = {}
    for i in np.flatnonzero(alive):
        on_node = held.get(int(i), [])
        if request.nodes:
            found = _evict_whole(state, int(i), on_node)
        else:
            found = _evict_some(state, int(i), on_node, request)
        if isinstance(found, str):
            counts[found] = counts.get(found, 0) + 1
        else:
            freeable[int(i)] = found
    if request.kind is Kind.GANG:
        options = _gang_options(state, request.nodes, freeable)
        most = _most_in_one_dc(state, freeable)
        prefix = f"need {request.nodes} freeable nodes with InfiniBand in one data centre"
        prefix += f", {most} found"
        unit = "node sets"
    else:
        options = [(i,) for _, i in sorted((_cost(ev), i) for i, ev in freeable.items())]
        prefix = "no node can be freed"
        unit = "nodes"
    for nodes in options[:MAX_TRIES]:
        evicted = [h for i in nodes for h in freeable[i]]
        plan = _verify(state, scheduler, request, nodes, evicted)
        if plan is not None:
            return plan
    if options:
        counts[f"{unit} {NOWHERE}"] = min(len(options), MAX_TRIES)
    if len(options) > MAX_TRIES:
        counts[f"{unit} left untried"] = len(options) - MAX_TRIES
    return Pending(_reason(prefix, counts), counts)


def apply_plan(
    state: FleetState, running: Sequence[tuple[Request, Placement]], plan: DefragPlan
) -> dict[str, Placement]:
    """Carry out `plan`'s moves on `state` (a copy, for what-if); returns the new placements.

    Raises ValueError (state partly changed) if a move no longer fits.
    """
    by_id = {req.id: (req, placement) for req, placement in running}
    moved: dict[str, Placement] = {}
    for move in plan.moves:
        req, old = by_id[move.container_id]
        state.forget(old)
        b = old.bindings[0]
        target = state.index[move.to_node]
        if b.exclusive:
            binding = whole_node_binding(state, target)
        else:
            binding = Binding(target, move.gpus, b.milli, b.cpu_milli, b.memory_mib, tag=b.tag)
        leaf, spine = state.leaf[target], state.spine[target]
        new = Placement(
            req.id,
            (binding,),
            (state.leaves[leaf],) if leaf >= 0 else (),
            (state.spines[spine],) if spine >= 0 else (),
        )
        state.assume(new)
        moved[req.id] = new
    return moved


def _held_by_node(
    state: FleetState, running: Sequence[tuple[Request, Placement]]
) -> dict[int, list[_Held]]:
    held: dict[int, list[_Held]] = {}
    for req, placement in running:
        movable = req.movable and len(placement.bindings) == 1
        for b in placement.bindings:
            held.setdefault(b.node, []).append(
                _Held(
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


def _cost(evicted: Sequence[_Held]) -> Cost:
    return len(evicted), sum(h.moved_milli for h in evicted)


def _evict_whole(state: FleetState, i: int, held: list[_Held]) -> list[_Held] | str:
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


def _evict_some(state: FleetState, i: int, held: list[_Held], req: Request) -> list[_Held] | str:
    """The cheapest containers to evict from node i so a container request fits there."""
    if state.exclusive[i]:
        return _evict_whole(state, i, held)
    movable = [h for h in held if h.movable]
    best: list[_Held] | None = None
    for chosen in _gpu_options(state, i, movable, req):
        evicted = _top_up(state, i, movable, chosen, req)
        if evicted is not None and (best is None or _cost(evicted) < _cost(best)):
            best = evicted
    if best is None:
        return UNMOVABLE if len(movable) < len(held) else UNLISTED
    return best


def _gpu_options(
    state: FleetState, i: int, movable: list[_Held], req: Request
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
    state: FleetState, i: int, movable: list[_Held], chosen: frozenset[int], req: Request
) -> list[_Held] | None:
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


def _covers(h: _Held, cpu: int, mem: int) -> tuple[float, int]:
    """How much of the CPU and memory deficits (negative surpluses) evicting `h` covers, then
    the fewer milli-GPU moved the better."""
    share = min(h.cpu_milli, -cpu) / -cpu if cpu < 0 else 0.0
    share += min(h.memory_mib, -mem) / -mem if mem < 0 else 0.0
    return share, -h.moved_milli


def _gang_options(
    state: FleetState, n: int, freeable: dict[int, list[_Held]]
) -> list[tuple[int, ...]]:
    """Candidate n-node sets, best first: fewest IB leaves, fewest spines, fewest moves.

    Per data centre: each leaf alone; per spine, and across the data centre, the fewest leaves
    (largest first) that hold n freeable nodes. Each pool gives its n cheapest nodes.
    """
    cost = {i: _cost(ev) for i, ev in freeable.items()}
    nodes = np.array(sorted(freeable), dtype=np.int64)
    found: set[tuple[int, ...]] = set()
    for dc in np.unique(state.dc[nodes]) if len(nodes) else ():
        in_dc = nodes[state.dc[nodes] == dc]
        if len(in_dc) < n:
            continue
        by_leaf: dict[int, list[int]] = {}
        for i in sorted(in_dc.tolist(), key=lambda i: (cost[i], i)):
            by_leaf.setdefault(int(state.leaf[i]), []).append(i)
        by_spine: dict[int, list[int]] = {}
        for leaf, members in by_leaf.items():
            by_spine.setdefault(int(state.spine[members[0]]), []).append(leaf)
        pools = [[leaf] for leaf in by_leaf]
        pools += [_largest_leaves(ls, by_leaf, n) for s, ls in by_spine.items() if s >= 0]
        pools.append(_largest_leaves(list(by_leaf), by_leaf, n))
        for pool in pools:
            members = sorted((i for leaf in pool for i in by_leaf[leaf]), key=lambda i: cost[i])
            if len(members) >= n:
                found.add(tuple(sorted(members[:n])))

    def key(chosen: tuple[int, ...]) -> tuple[int, int, int, int]:
        leaves = len({int(state.leaf[i]) for i in chosen})
        spines = len({int(state.spine[i]) for i in chosen})
        return leaves, spines, sum(cost[i][0] for i in chosen), sum(cost[i][1] for i in chosen)

    return sorted(found, key=lambda chosen: (key(chosen), chosen))


def _largest_leaves(leaves: list[int], by_leaf: dict[int, list[int]], n: int) -> list[int]:
    """The fewest of `leaves` holding n nodes, largest first (all of them if they fall short)."""
    pool: list[int] = []
    held = 0
    for leaf in sorted(leaves, key=lambda leaf: -len(by_leaf[leaf])):
        if held >= n:
            break
        pool.append(leaf)
        held += len(by_leaf[leaf])
    return pool


def _verify(
    state: FleetState,
    scheduler: Scheduler,
    request: Request,
    nodes: tuple[int, ...],
    evicted: list[_Held],
) -> DefragPlan | None:
    """Re-place `evicted` off `nodes` on a copy, then place `request`; None if either fails."""
    trial = state.copy()
    for h in evicted:
        trial.forget(h.placement)
    fenced = list(nodes)
    trial.schedulable[fenced] = False
    trial.version[fenced] += 1  # every change bumps the version: cached scores rely on it
    moves: list[Move] = []
    for h in sorted(evicted, key=lambda h: (-h.moved_milli, -h.cpu_milli, -h.memory_mib)):
        placed = scheduler.bind(trial, h.request)
        if isinstance(placed, Pending):
            return None
        b = placed.bindings[0]
        moves.append(Move(h.request.id, state.names[h.node], trial.names[b.node], b.gpus))
    trial.schedulable[fenced] = state.schedulable[fenced]
    trial.version[fenced] += 1
    final = scheduler.place(trial, request)
    if isinstance(final, Pending):
        return None
    return DefragPlan(request.id, tuple(moves), _names(state, final))


def _names(state: FleetState, placement: Placement) -> tuple[str, ...]:
    return tuple(state.names[i] for i in placement.nodes)


def _most_in_one_dc(state: FleetState, freeable: dict[int, list[_Held]]) -> int:
    if not freeable:
        return 0
    return int(np.bincount(state.dc[sorted(freeable)] + 1).max())


def _reason(prefix: str, counts: dict[str, int]) -> str:
    parts = ", ".join(f"{n} {why}" for why, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return f"{prefix}: {parts}" if parts else prefix
