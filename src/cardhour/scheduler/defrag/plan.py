"""Defragmentation planner: which movable containers to move, and where, so a request fits.

`plan_defrag` is pure: it reads a `FleetState` (with the running containers already assumed on
it) and returns a `DefragPlan` or a `Pending`, changing neither the state nor any placement (it
works on copies). `apply_plan` carries a plan out on a state, for what-if checks or to bring the
scheduler's snapshot up to date once the moves have happened.

How a plan is found:
1. If the request fits as things stand, the plan has no moves.
2. Every node that could host the request once emptied (schedulable, data centre, GPU model,
   size, InfiniBand for a gang) gets the cheapest set of movable containers whose eviction makes
   room (defrag/evictions.py); a node that would need an unmovable container (or an allocation
   not listed) to go is skipped. Cost = (containers moved, milli-GPU moved).
3. Candidates (nodes; for a gang, node sets in the fewest IB leaves, then fewest moves) are tried
   cheapest first on a copy of the state: forget the evicted containers, mark the candidate nodes
   unschedulable, re-place the evicted containers largest first with the scheduler, then the
   request itself must `place`. The first candidate that passes is the plan.

Only single-node containers marked `Request.movable` move; a gang member never does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from cardhour.scheduler.defrag.evictions import (
    Held,
    evict_some,
    evict_whole,
    eviction_cost,
    held_by_node,
)
from cardhour.scheduler.engine import Scheduler
from cardhour.scheduler.filters import DataCentre, GpuModel, run_filters
from cardhour.scheduler.framework import Context
from cardhour.scheduler.gang import whole_node_binding
from cardhour.scheduler.request import Binding, Kind, Pending, Placement, Request
from cardhour.scheduler.state import FleetState

MAX_TRIES = 64  # candidates verified (each re-places its containers) before giving up

NOWHERE = "whose containers fit nowhere else"


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
    held = held_by_node(state, running)
    freeable: dict[int, list[Held]] = {}
    for i in np.flatnonzero(alive):
        on_node = held.get(int(i), [])
        if request.nodes:
            found = evict_whole(state, int(i), on_node)
        else:
            found = evict_some(state, int(i), on_node, request)
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
        options = [(i,) for _, i in sorted((eviction_cost(ev), i) for i, ev in freeable.items())]
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


def _gang_options(
    state: FleetState, n: int, freeable: dict[int, list[Held]]
) -> list[tuple[int, ...]]:
    """Candidate n-node sets, best first: fewest IB leaves, fewest spines, fewest moves.

    Per data centre: each leaf alone; per spine, and across the data centre, the fewest leaves
    (largest first) that hold n freeable nodes. Each pool gives its n cheapest nodes.
    """
    cost = {i: eviction_cost(ev) for i, ev in freeable.items()}
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
    evicted: list[Held],
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


def _most_in_one_dc(state: FleetState, freeable: dict[int, list[Held]]) -> int:
    if not freeable:
        return 0
    return int(np.bincount(state.dc[sorted(freeable)] + 1).max())


def _reason(prefix: str, counts: dict[str, int]) -> str:
    parts = ", ".join(f"{n} {why}" for why, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return f"{prefix}: {parts}" if parts else prefix
