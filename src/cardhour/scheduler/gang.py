"""Whole nodes: one bare-metal node, or a gang of n nodes placed all or nothing.

A gang stays in one data centre (InfiniBand does not cross sites) and uses the fewest IB leaf
switches, then the fewest spines:
- if one leaf has n free nodes, the leaf with the fewest free nodes that still holds n (best fit);
- else, the largest leaves first and the last leaf the smallest that completes the gang, within
  each spine and across the data centre's spines; the fewest leaves win, then the fewest spines
  (then fewer spare nodes left broken).
The k largest leaves hold the most nodes of any k leaves, so the leaf count is minimal.
A single bare-metal node goes where it breaks the fewest gang-capable blocks: nodes without
InfiniBand first, then the leaf with the fewest free nodes.
"""

from __future__ import annotations

import numpy as np

from cardhour.scheduler.request import MILLI, Binding, Placement, Request
from cardhour.scheduler.state import FleetState


def whole_node_binding(state: FleetState, node: int) -> Binding:
    return Binding(
        node=int(node),
        gpus=tuple(range(int(state.gpu_count[node]))),
        milli=MILLI,
        cpu_milli=int(state.cpu_cap[node]),
        memory_mib=int(state.mem_cap[node]),
        exclusive=True,
    )


def _placement(state: FleetState, req: Request, nodes: np.ndarray) -> Placement:
    nodes = np.sort(nodes)
    leaves = sorted({state.leaves[i] for i in state.leaf[nodes] if i >= 0})
    spines = sorted({state.spines[i] for i in state.spine[nodes] if i >= 0})
    bindings = tuple(whole_node_binding(state, int(i)) for i in nodes)
    return Placement(req.id, bindings, tuple(leaves), tuple(spines))


def place_node(
    state: FleetState, req: Request, candidates: np.ndarray, rank: np.ndarray
) -> Placement:
    """One bare-metal node from the non-empty `candidates` (indices)."""
    leaf = state.leaf[candidates]
    per_leaf = np.bincount(leaf[leaf >= 0], minlength=max(len(state.leaves), 1))
    crowd = np.where(leaf >= 0, per_leaf[np.maximum(leaf, 0)], 0)
    best = candidates[np.lexsort((rank[candidates], crowd))[0]]
    return _placement(state, req, np.array([best]))


def _fewest_leaves(leaf_ids: np.ndarray, free: np.ndarray, n: int) -> tuple[np.ndarray, int] | None:
    """Leaves (ids) holding n nodes, fewest possible, the last one best-fit; and the spare count."""
    if free.sum() < n:
        return None
    single = free >= n
    if single.any():
        i = np.flatnonzero(single)[np.argmin(free[single])]
        return leaf_ids[[i]], int(free[i] - n)
    order = np.argsort(-free, kind="stable")
    cum = np.cumsum(free[order])
    k = int(np.searchsorted(cum, n))  # leaves needed: k + 1
    before = int(cum[k - 1]) if k else 0
    rest = order[k:]
    fits = free[rest] >= n - before
    last = rest[fits][np.argmin(free[rest][fits])]
    chosen = np.append(order[:k], last)
    return leaf_ids[chosen], int(free[chosen].sum() - n)


def place_gang(
    state: FleetState, req: Request, candidates: np.ndarray, rank: np.ndarray
) -> Placement | str:
    """n whole nodes from `candidates` (indices), or a reason why they cannot be found."""
    n = req.nodes
    cand = candidates[state.leaf[candidates] >= 0]
    best: tuple[tuple[int, int, int], np.ndarray, np.ndarray] | None = None
    most = 0
    for dc in np.unique(state.dc[cand]):
        in_dc = cand[state.dc[cand] == dc]
        most = max(most, len(in_dc))
        if len(in_dc) < n:
            continue
        per_leaf = np.bincount(state.leaf[in_dc], minlength=len(state.leaves))
        leaf_ids = np.flatnonzero(per_leaf)
        leaf_spine = np.zeros(len(state.leaves), dtype=np.int64)
        leaf_spine[state.leaf[in_dc]] = state.spine[in_dc]
        options: list[tuple[tuple[int, int, int], np.ndarray]] = []
        for spine in np.unique(leaf_spine[leaf_ids]):
            ids = leaf_ids[leaf_spine[leaf_ids] == spine]
            found = _fewest_leaves(ids, per_leaf[ids], n)
            if found is not None:
                options.append(((len(found[0]), 1, found[1]), found[0]))
        if len(np.unique(leaf_spine[leaf_ids])) > 1:  # several spines may need fewer leaves
            found = _fewest_leaves(leaf_ids, per_leaf[leaf_ids], n)
            if found is not None:
                spines = len(np.unique(leaf_spine[found[0]]))
                options.append(((len(found[0]), spines, found[1]), found[0]))
        for key, leaves in options:
            if best is None or key < best[0]:
                best = (key, in_dc, leaves)
    if best is None:
        return f"need {n} whole free nodes with InfiniBand in one data centre, at most {most} free"
    return _placement(state, req, _take(state, best[1], best[2], n, rank))


def _take(
    state: FleetState, nodes: np.ndarray, leaves: np.ndarray, n: int, rank: np.ndarray
) -> np.ndarray:
    """n nodes from `leaves` in the order given, by tie rank inside each leaf."""
    picked: list[np.ndarray] = []
    left = n
    for leaf in leaves:
        here = nodes[state.leaf[nodes] == leaf]
        here = here[np.argsort(rank[here], kind="stable")][:left]
        picked.append(here)
        left -= len(here)
    return np.concatenate(picked)
