"""Replacing failed nodes of a multi-node instance (a cluster, or bare metal over several
nodes) while the rest of it stays where it is.

Each failed node's place goes to an empty, schedulable node of the same GPU model and size in
the same data centre (InfiniBand does not cross sites), as close in the fabric as it can be:
the failed node's own IB leaf first, then a leaf the rest of the instance uses, then the failed
node's spine, then anywhere in the data centre. Ties go to the node listed first, so a replay
picks the same node. Pure: reads the state, changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cardhour.scheduler.state import FleetState


def replacements(
    state: FleetState, failed: Sequence[str], keep: Sequence[str]
) -> dict[str, str] | None:
    """Failed node name → the node that takes its place, for every node of `failed`; None when
    one of them has none (the caller then places the whole instance again). `keep`: the
    instance's nodes that stay."""
    taken = {state.index[name] for name in (*failed, *keep)}
    kept_leaves = [int(state.leaf[state.index[n]]) for n in keep if state.leaf[state.index[n]] >= 0]
    free = state.empty() & state.schedulable
    chosen: dict[str, str] = {}
    for name in sorted(failed):
        f = state.index[name]
        fits = (
            free
            & (state.model == state.model[f])
            & (state.gpu_count == state.gpu_count[f])
            & (state.dc == state.dc[f])
        )
        fits[list(taken)] = False
        candidates = np.flatnonzero(fits)
        if not len(candidates):
            return None
        leaf, spine = state.leaf[candidates], state.spine[candidates]
        rank = np.full(len(candidates), 3)
        rank[(spine >= 0) & (spine == state.spine[f])] = 2
        rank[(leaf >= 0) & np.isin(leaf, kept_leaves)] = 1
        rank[(leaf >= 0) & (leaf == state.leaf[f])] = 0
        best = int(candidates[np.argmin(rank)])  # argmin: the first of the closest
        chosen[name] = state.names[best]
        taken.add(best)
    return chosen
