"""Compiled loops behind the lookahead (lookahead.py): every rollout of one decision in one
call.

`rollouts` returns what `kernels.fgd.rollout` returns for each candidate and sample, exactly
(`tests/scheduler/test_lookahead.py` compares them), with far less work per future pod:

- Per sample, one base rollout places the futures without the container, keeping FGD's few best
  nodes at every step and its placements. A candidate's rollout differs from it only at the
  nodes where their states differ (the candidate, then wherever the two chose differently), so
  at each step FGD's choice is the base's best node not among those unless one of those scores
  higher: a handful of scores per step instead of every touched node's, and only placements on
  those nodes are bound (`_run`).
- A node no rollout has touched keeps its score, so FGD's choice among the untouched nodes is
  the first untouched one on the shape's list of best nodes (kernels/lookahead_cache.py; a full scan
  only when the list runs out); the touched nodes, at most one per pod placed, are scored one
  by one. The rollouts of one decision share their futures, so they put the same nodes into
  the same states again and again: each state a call reaches gets an id once (`_intern`, when
  a placement makes it), its scores and F_n(M) are kept per id for the call, and each is looked
  up in the memo kept between calls (kernels/lookahead_cache.py) or computed on first need only.

The arrays are `FgdTable`'s bundles (kernels/fgd.py's docstring). Scores of nodes that changed
are written as `best_node` would; rollouts change nothing else that outlives the call.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from cardhour.scheduler.kernels.fgd import MILLI, ROLLOUT_VERSIONS, plain, refresh_node
from cardhour.scheduler.kernels.lookahead_cache import (
    holds_state,
    memo_frag,
    memo_score,
    prepare_lists,
    state_hash,
    write_state,
)

_RANKED = 4  # the base rollout's best nodes kept per step


@nb.njit(cache=True)
def rollouts(first_t, candidates, futures, st, mt, tb, listing, memo):
    """For each candidate node c: (Σ_s GPU milli placed, Σ_s F(M) after) over the rollouts
    "shape `first_t` on c, then the shapes `futures[s]` in order by FGD where they fit", s in
    order — what `kernels.fgd.rollout` returns, summed. Everything is put back."""
    for c in range(candidates.shape[0]):
        if tb[0][first_t, candidates[c]] < 0:
            raise ValueError("a lookahead candidate does not fit the request")
    index, n_lists = prepare_lists(first_t, futures, st, mt, tb, listing)
    steps = futures.shape[1] + 1
    width = st[0].shape[1]
    # states a call can reach: a placement makes at most one, and a rollout binds at most one
    # placement per step (the base: its futures; a candidate's: the container, then each
    # future at most once, bound or replayed)
    cap = futures.shape[0] * (futures.shape[1] + candidates.shape[0] * steps)
    table = 1
    while table < 2 * cap:
        table *= 2
    n_types = mt[0].shape[1]
    scratch = (
        np.empty(steps, dtype=np.int64),  # touched nodes, in order of first touch
        np.empty(steps, dtype=np.int64),  # their version before
        np.empty((steps, n_types)),  # their meter rows before: fit
        np.empty((steps, n_types)),  # small
        np.empty((steps, 3)),  # idle, frag, seen
        np.empty(steps, dtype=np.int64),  # 5 placements: node
        np.empty(steps, dtype=np.int64),  # shape
        np.empty((steps, width), dtype=np.int64),  # GPUs
        np.empty(steps, dtype=np.int64),  # number of GPUs
        np.empty(st[0].shape[0], dtype=np.int64),  # per node: its row above once touched
        # 10 the node states this call reached, each once (_intern): per touched node its
        # state's id; a hash table of ids by state (tags: state hash | 1, 0 = empty; ids)
        np.empty(st[0].shape[0], dtype=np.int64),
        np.zeros(table, dtype=np.int64),
        np.empty(table, dtype=np.int64),
        np.empty((cap, 4 + width), dtype=np.int64),  # 13 per id: node, CPU, memory, flags, GPUs
        np.empty(cap, dtype=np.int64),  # its state_hash
        np.empty((cap, n_lists)),  # 15 per id and listed column: score
        np.empty((cap, n_lists), dtype=np.int64),  # the share's GPU
        np.zeros((cap, n_lists), dtype=np.bool_),  # whether known
        np.empty(cap),  # 18 per id: F_n(M)
        np.zeros(cap, dtype=np.bool_),  # whether known
        np.zeros(1, dtype=np.int64),  # 20 ids given
    )
    trail = (
        np.empty((steps, _RANKED)),  # the base rollout, per future: FGD's best nodes' scores
        np.empty((steps, _RANKED), dtype=np.int64),  # the nodes, best first
        np.empty((steps, _RANKED), dtype=np.int64),  # their share's GPU
        np.empty(steps, dtype=np.int64),  # how many
        np.empty(steps, dtype=np.bool_),  # whether they are every node that fits
        np.empty(2 * steps, dtype=np.int64),  # nodes whose state differs from the base rollout's
        np.zeros(st[0].shape[0], dtype=np.bool_),  # per node: one of those
        np.empty(steps, dtype=np.int64),  # the base's placements: at which future
        np.empty(steps, dtype=np.int64),  # node
        np.empty(steps, dtype=np.int64),  # shape
        np.empty((steps, width), dtype=np.int64),  # GPUs
        np.empty(steps, dtype=np.int64),  # number of GPUs
        np.empty(st[0].shape[0]),  # per node the base touched: its F_n(M) at the end
        np.zeros(st[0].shape[0], dtype=np.bool_),  # per node: the base touched it
    )
    volumes = np.zeros(candidates.shape[0], dtype=np.int64)
    frags = np.zeros(candidates.shape[0])
    _run(
        first_t, candidates, futures, st, mt, tb, index, listing, memo, scratch, trail,
        volumes, frags,
    )  # fmt: skip
    return volumes, frags


@plain(inline=True)
def _key(n, t, j, st, mt, tb, memo, scratch):
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
def _frag(n, st, mt, memo, scratch):
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
def _intern(n, st, scratch):
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
def _winner(t, j, n_touched, st, mt, tb, listing, memo, scratch):
    """FGD's node for shape t (listed column j) in the rollout's state: (score, node, the
    share's GPU); node -1 where nothing fits."""
    version = st[3]
    key, gpu = tb[0], tb[1]
    best, lengths, bound = listing[1], listing[2], listing[3]
    touched = scratch[0]
    top = -1.0
    arg = -1
    g = -1
    found = False
    for q in range(lengths[t]):  # untouched nodes keep their listed scores
        n = best[t, q]
        if version[n] < ROLLOUT_VERSIONS:
            top, arg, g = key[t, n], n, gpu[t, n]
            found = True
            break
    if not found and bound[t] >= 0:  # every listed node touched: scan the rest
        for n in range(key.shape[1]):
            if version[n] < ROLLOUT_VERSIONS and key[t, n] > top:
                top, arg, g = key[t, n], n, gpu[t, n]
    for q in range(n_touched):
        n = touched[q]
        value, h = _key(n, t, j, st, mt, tb, memo, scratch)
        if value > top or (value == top and value >= 0 and n < arg):
            top, arg, g = value, n, h
    return top, arg, g


@plain(inline=True)
def _gpus_into(arg, t, g, done, st, tb, scratch):
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
def _apply(arg, t, n_touched, done, st, mt, tb, scratch):
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
    scratch[10][arg] = _intern(arg, st, scratch)
    return n_touched


@plain(inline=True)
def _change(n_touched, wsum, st, mt, memo, scratch):
    """The change of Σ_n round(F_n(M)·wsum) over the touched nodes (integer-valued: exact)."""
    touched, saved = scratch[0], scratch[4]
    total = 0.0
    for q in range(n_touched):
        total += round(_frag(touched[q], st, mt, memo, scratch) * wsum)
        total -= round(saved[q, 1] * wsum)
    return total


@plain(inline=True)
def _undo(n_touched, done, st, mt, tb, scratch):
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
def _replay(d, done, n_touched, st, mt, tb, scratch, trail):
    """Bind the base rollout's placement d again as placement `done`; returns the number of
    touched nodes."""
    log_node, log_kind, log_taken, log_count = trail[8:12]
    taken, counts = scratch[7], scratch[8]
    counts[done] = log_count[d]
    for h in range(log_count[d]):
        taken[done, h] = log_taken[d, h]
    return _apply(log_node[d], log_kind[d], n_touched, done, st, mt, tb, scratch)


@plain(inline=True)
def _rank(value, n, h, i, ranked, trail):
    """Put node n (score value, share's GPU h) into step i's ranking if it is among the best."""
    rank_key, rank_node, rank_gpu, rank_count = trail[:4]
    size = rank_count[i]
    if size == ranked:
        last = rank_key[i, size - 1]
        if value < last or (value == last and n > rank_node[i, size - 1]):
            return
        size -= 1
    q = size
    while q > 0 and (
        rank_key[i, q - 1] < value or (rank_key[i, q - 1] == value and rank_node[i, q - 1] > n)
    ):
        rank_key[i, q], rank_node[i, q], rank_gpu[i, q] = (
            rank_key[i, q - 1],
            rank_node[i, q - 1],
            rank_gpu[i, q - 1],
        )
        q -= 1
    rank_key[i, q], rank_node[i, q], rank_gpu[i, q] = value, n, h
    rank_count[i] = size + 1


@plain(inline=True)
def _ranking(t, j, i, n_touched, st, mt, tb, listing, memo, scratch, trail):
    """The _RANKED best nodes for shape t (listed column j) in the rollout's state, as step i's
    ranking (`_winner`'s order, and whether it holds every node that fits); returns the best
    (score, node, share's GPU), node -1 where nothing fits."""
    version = st[3]
    key, gpu = tb[0], tb[1]
    best, lengths, bound = listing[1], listing[2], listing[3]
    touched = scratch[0]
    rank_key, rank_node, rank_gpu, rank_count, rank_all = trail[:5]
    rank_count[i] = 0
    ranked = 0
    for q in range(lengths[t]):  # untouched nodes keep their listed scores, above the bound
        n = best[t, q]
        if version[n] < ROLLOUT_VERSIONS:
            if ranked == _RANKED:
                ranked += 1  # more nodes fit
                break
            _rank(key[t, n], n, gpu[t, n], i, _RANKED, trail)
            ranked += 1
    if ranked == 0 and bound[t] >= 0:  # every listed node touched: scan the rest
        for n in range(key.shape[1]):
            if version[n] < ROLLOUT_VERSIONS and key[t, n] >= 0:
                _rank(key[t, n], n, gpu[t, n], i, _RANKED, trail)
                ranked += 1
    elif ranked <= _RANKED and bound[t] >= 0:
        ranked = -1  # the list ran out: nodes off it may fit, scoring at most the bound
    for q in range(n_touched):
        n = touched[q]
        value, h = _key(n, t, j, st, mt, tb, memo, scratch)
        if value >= 0:
            _rank(value, n, h, i, _RANKED, trail)
            if ranked >= 0:
                ranked += 1
    if ranked < 0:  # keep only what is known to rank above every node off the list
        size = 1  # the first listed node's score is above the bound
        while size < rank_count[i] and rank_key[i, size] > bound[t]:
            size += 1
        rank_count[i] = size
    rank_all[i] = 0 <= ranked <= _RANKED
    if rank_count[i] == 0:
        return -1.0, -1, -1
    return rank_key[i, 0], rank_node[i, 0], rank_gpu[i, 0]


@plain()
def _run(
    first_t, candidates, futures, st, mt, tb, index, listing, memo, scratch, trail,
    volumes, frags,
):  # fmt: skip
    # Rollout c is followed step by step against the base rollout (the futures without the
    # container; its best nodes per step and its placements are kept). Only the nodes in
    # `differ` have another state in rollout c than in the base at the same step, so FGD's
    # choice is the base's best node not among them unless one of them scores higher, and
    # only their placements are bound: a node joins with the base's placements on it so far.
    # Where the base's kept best nodes all differ, rollout c binds everything the base bound
    # so far on the others and goes on in full.
    version = st[3]
    frag, seen = mt[3], mt[4]
    wsum = mt[10][0]
    gpu, shapes = tb[1], tb[4]
    touched, saved = scratch[0], scratch[4]
    nodes, kinds, taken, counts, row = scratch[5:10]
    rank_key, rank_node, rank_gpu, rank_count, rank_all, differ, differs = trail[:7]
    log_step, log_node, log_kind, log_taken, log_count, base_end, in_base = trail[7:]
    n_nodes = version.shape[0]
    samples, horizon = futures.shape

    base = 0.0  # Σ_n round(F_n·wsum) of the fleet as it is: integer-valued, so exact
    for n in range(n_nodes):
        if seen[n] != version[n]:
            refresh_node(n, st, mt)
        base += round(frag[n] * wsum)

    for s in range(samples):
        n_touched = 0
        done = 0
        for i in range(horizon):
            t = futures[s, i]
            top, arg, g = _ranking(
                t, index[t], i, n_touched, st, mt, tb, listing, memo, scratch, trail
            )
            if arg < 0:
                continue
            _gpus_into(arg, t, g, done, st, tb, scratch)
            n_touched = _apply(arg, t, n_touched, done, st, mt, tb, scratch)
            log_step[done] = i
            done += 1
        base_done = done
        for d in range(done):
            log_node[d], log_kind[d], log_count[d] = nodes[d], kinds[d], counts[d]
            for h in range(counts[d]):
                log_taken[d, h] = taken[d, h]
        for q in range(n_touched):
            n = touched[q]
            in_base[n] = True
            base_end[n] = _frag(n, st, mt, memo, scratch)
        base_total = base + _change(n_touched, wsum, st, mt, memo, scratch)
        _undo(n_touched, done, st, mt, tb, scratch)

        for c in range(candidates.shape[0]):
            node = candidates[c]
            _gpus_into(node, first_t, gpu[first_t, node], 0, st, tb, scratch)
            n_touched = _apply(node, first_t, 0, 0, st, mt, tb, scratch)
            done = 1
            differ[0] = node
            differs[node] = True
            n_differ = 1
            volume = 0
            full = False
            for i in range(horizon):
                t = futures[s, i]
                j = index[t]
                w = -1
                if full:
                    top, arg, g = _winner(t, j, n_touched, st, mt, tb, listing, memo, scratch)
                else:
                    w = rank_node[i, 0] if rank_count[i] else -1
                    top, arg, g = -1.0, -1, -1
                    for r in range(rank_count[i]):  # the base's best node whose state is the same
                        n = rank_node[i, r]
                        if not differs[n]:
                            top, arg, g = rank_key[i, r], n, rank_gpu[i, r]
                            break
                    if arg < 0 and not rank_all[i]:  # all differ: go on in full
                        for d in range(base_done):
                            if log_step[d] >= i:
                                break
                            if not differs[log_node[d]]:
                                n_touched = _replay(d, done, n_touched, st, mt, tb, scratch, trail)
                                done += 1
                        full = True
                        top, arg, g = _winner(t, j, n_touched, st, mt, tb, listing, memo, scratch)
                    else:
                        for d in range(n_differ):
                            n = differ[d]
                            value, h = _key(n, t, j, st, mt, tb, memo, scratch)
                            if value > top or (value == top and value >= 0 and n < arg):
                                top, arg, g = value, n, h
                if arg < 0:
                    continue
                volume += shapes[t, 2] * shapes[t, 3]
                if not full:
                    if arg == w and not differs[w]:  # the base's own step
                        continue
                    for n in (arg, w):
                        if n >= 0 and not differs[n]:
                            differs[n] = True
                            differ[n_differ] = n
                            n_differ += 1
                            for d in range(base_done):
                                if log_step[d] >= i:
                                    break
                                if log_node[d] == n:
                                    n_touched = _replay(
                                        d, done, n_touched, st, mt, tb, scratch, trail
                                    )
                                    done += 1
                _gpus_into(arg, t, g, done, st, tb, scratch)
                n_touched = _apply(arg, t, n_touched, done, st, mt, tb, scratch)
                done += 1
            if full:
                total = base + _change(n_touched, wsum, st, mt, memo, scratch)
            else:  # the base's total, but for the nodes that differ
                total = base_total
                for d in range(n_differ):
                    n = differ[d]
                    before = base_end[n] if in_base[n] else saved[row[n], 1]
                    after = _frag(n, st, mt, memo, scratch)
                    total += round(after * wsum) - round(before * wsum)
            _undo(n_touched, done, st, mt, tb, scratch)
            for d in range(n_differ):
                differs[differ[d]] = False
            volumes[c] += volume
            frags[c] += total / wsum
        for d in range(base_done):
            in_base[log_node[d]] = False
