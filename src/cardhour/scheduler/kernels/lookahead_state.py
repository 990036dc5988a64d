"""A lookahead rollout's moves on the live fleet arrays, inlined into `kernels.lookahead._run`.

`bind` places a shape on a node and keeps what to put back, `undo` puts back every placement
of the rollout, `replay` binds one of the base rollout's logged placements again; `score_of`
and `frag_of` read a node's FGD score and F_n(M) in the rollout's state, once per node state
the call reaches (`intern_state` gives each state an id on first sight).

Contract: `st`, `mt`, `tb` are `FgdTable`'s bundles (kernels/fgd.py's docstring), `memo` the
memo kept between calls (kernels/lookahead_cache.py); `scratch` and `trail` are the tuples
`kernels.lookahead.rollouts` allocates, read by position (its comments number them). A node is
touched by the rollout exactly when its version is at least `ROLLOUT_VERSIONS`; `undo` gives
every touched node back its capacity, meter rows and version, so a rollout leaves nothing
behind but the call's ids and the memo's entries. Every function here is compiled into its
caller (`plain(inline=True)`).
"""

from __future__ import annotations

# imported so that this module's source is in the kernels' cache stamp (kernels/numba_cache.py)
import numba  # noqa: F401
import numpy as np

from cardhour.scheduler.kernels.fgd import MILLI, ROLLOUT_VERSIONS, plain
from cardhour.scheduler.kernels.lookahead_cache import (
    holds_state,
    memo_frag,
    memo_score,
    state_hash,
    write_state,
)


@plain(inline=True)
def score_of(n, t, j, st, mt, tb, memo, scratch):
    """Node n's (score, share's GPU) for shape t (listed column j) in the rollout's state."""
    if st[3][n] < ROLLOUT_VERSIONS:
        return tb[0][t, n], tb[1][t, n]
    i = scratch[10][n]
    score, gpu, known = scratch[15], scratch[16], scratch[17]
    if not known[i, j]:
        score[i, j], gpu[i, j] = memo_score(n, t, scratch[14][i], st, mt, tb, memo)
        known[i, j] = True
    return score[i, j], gpu[i, j]


@plain(inline=True)
def frag_of(n, st, mt, memo, scratch):
    """F_n(M) of node n in the rollout's state."""
    if st[3][n] < ROLLOUT_VERSIONS:  # untouched: its id, if any, is from an earlier rollout
        return memo_frag(n, state_hash(n, st), st, mt, memo)
    i = scratch[10][n]
    frag, known = scratch[18], scratch[19]
    if not known[i]:
        frag[i] = memo_frag(n, scratch[14][i], st, mt, memo)
        known[i] = True
    return frag[i]


@plain(inline=True)
def intern_state(n, st, scratch):
    """The id of node n's state now among the states this call reached (a new one on first
    sight): scores and F_n(M) are kept per id, so a state reached again, in another candidate's
    rollout or after a replay, is looked up once, not once per read."""
    tags, ids, states, hashes, given = (
        scratch[11],
        scratch[12],
        scratch[13],
        scratch[14],
        scratch[20],
    )
    hs = state_hash(n, st)
    tag = hs | 1
    mask = tags.shape[0] - 1
    k = (hs >> 29) & mask
    while tags[k] != 0:
        if tags[k] == tag:
            i = ids[k]
            if states[i, 0] == n and holds_state(states[i], 1, n, st):
                return i
        k = (k + 1) & mask
    i = given[0]
    given[0] += 1
    tags[k] = tag
    ids[k] = i
    states[i, 0] = n
    write_state(states[i], 1, n, st)
    hashes[i] = hs
    return i


@plain(inline=True)
def gpus_into(arg, t, g, done, st, tb, scratch):
    """Which GPUs of node arg shape t takes (g: a share's GPU), written as placement `done`."""
    gpu_free = st[0]
    shapes = tb[4]
    taken, counts = scratch[7], scratch[8]
    k, milli = shapes[t, 2], shapes[t, 3]
    if k == 1 and milli < MILLI:
        taken[done, 0] = g
        counts[done] = 1
    else:  # the first k whole free GPUs, as fgd_kernels._gpus_for
        m = 0
        for h in range(gpu_free.shape[1]):
            if m == k:
                break
            if gpu_free[arg, h] == MILLI:
                taken[done, m] = h
                m += 1
        counts[done] = m


@plain(inline=True)
def bind(arg, t, n_touched, done, st, mt, tb, scratch):
    """Bind placement `done` (node arg, shape t, its GPUs written) in the rollout, keeping what
    to put back. Returns the number of touched nodes."""
    gpu_free, cpu_free, mem_free, version = st[0], st[1], st[2], st[3]
    fit, small, idle, frag, seen = mt[0], mt[1], mt[2], mt[3], mt[4]
    shapes, counter = tb[4], tb[6]
    touched, first_version, saved_fit, saved_small, saved = scratch[:5]
    nodes, kinds, taken, counts, row = scratch[5:10]
    if version[arg] < ROLLOUT_VERSIONS:  # first touch: keep what to put back
        touched[n_touched] = arg
        row[arg] = n_touched
        first_version[n_touched] = version[arg]
        for m in range(fit.shape[1]):
            saved_fit[n_touched, m] = fit[arg, m]
            saved_small[n_touched, m] = small[arg, m]
        saved[n_touched, 0] = idle[arg]
        saved[n_touched, 1] = frag[arg]
        saved[n_touched, 2] = seen[arg]
        n_touched += 1
    cpu_free[arg] -= shapes[t, 0]
    mem_free[arg] -= shapes[t, 1]
    for h in range(counts[done]):
        gpu_free[arg, taken[done, h]] -= shapes[t, 3]
    nodes[done] = arg
    kinds[done] = t
    counter[0] += 1
    version[arg] = counter[0]
    scratch[10][arg] = intern_state(arg, st, scratch)
    return n_touched


@plain(inline=True)
def frag_change(n_touched, wsum, st, mt, memo, scratch):
    """The change of Σ_n round(F_n(M)·wsum) over the touched nodes (integer-valued: exact)."""
    touched, saved = scratch[0], scratch[4]
    total = 0.0
    for q in range(n_touched):
        total += round(frag_of(touched[q], st, mt, memo, scratch) * wsum)
        total -= round(saved[q, 1] * wsum)
    return total


@plain(inline=True)
def undo(n_touched, done, st, mt, tb, scratch):
    """Undo every placement and put the touched nodes' rows back."""
    gpu_free, cpu_free, mem_free, version = st[0], st[1], st[2], st[3]
    fit, small, idle, frag, seen = mt[0], mt[1], mt[2], mt[3], mt[4]
    shapes = tb[4]
    touched, first_version, saved_fit, saved_small, saved = scratch[:5]
    nodes, kinds, taken, counts = scratch[5:9]
    for d in range(done - 1, -1, -1):
        n, t = nodes[d], kinds[d]
        cpu_free[n] += shapes[t, 0]
        mem_free[n] += shapes[t, 1]
        for h in range(counts[d]):
            gpu_free[n, taken[d, h]] += shapes[t, 3]
    for q in range(n_touched):
        n = touched[q]
        version[n] = first_version[q]
        for m in range(fit.shape[1]):
            fit[n, m] = saved_fit[q, m]
            small[n, m] = saved_small[q, m]
        idle[n] = saved[q, 0]
        frag[n] = saved[q, 1]
        seen[n] = np.int64(saved[q, 2])


@plain(inline=True)
def replay(d, done, n_touched, st, mt, tb, scratch, trail):
    """Bind the base rollout's placement d again as placement `done`; returns the number of
    touched nodes."""
    log_node, log_kind, log_taken, log_count = trail[8:12]
    taken, counts = scratch[7], scratch[8]
    counts[done] = log_count[d]
    for h in range(log_count[d]):
        taken[done, h] = log_taken[d, h]
    return bind(log_node[d], log_kind[d], n_touched, done, st, mt, tb, scratch)
