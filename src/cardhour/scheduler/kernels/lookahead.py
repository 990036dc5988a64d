"""Compiled loops behind the lookahead (lookahead.py): every rollout of one decision in one
call.

`rollouts` returns what `kernels.fgd.rollout` returns for each candidate and sample, exactly
(`tests/scheduler/test_lookahead.py` compares them), with far less work per future pod:

- Per sample, one base rollout places the futures without the container, keeping FGD's few best
  nodes at every step and its placements. A candidate's rollout differs from it only at the
  nodes where their states differ (the candidate, then wherever the two chose differently), so
  at each step FGD's choice is the base's best node not among those unless one of those scores
  higher: a handful of scores per step instead of every touched node's, and only placements on
  those nodes are bound (`_run`; FGD's choice in kernels/lookahead_choice.py).
- A node no rollout has touched keeps its score, so FGD's choice among the untouched nodes is
  the first untouched one on the shape's list of best nodes (kernels/lookahead_cache.py; a full
  scan only when the list runs out); the touched nodes, at most one per pod placed, are scored
  one by one. The rollouts of one decision share their futures, so they put the same nodes into
  the same states again and again: each state a call reaches gets an id once (`intern_state`,
  when a placement makes it), its scores and F_n(M) are kept per id for the call, and each is
  looked up in the memo kept between calls (kernels/lookahead_cache.py) or computed on first
  need only. A rollout's moves (bind, undo, replay, reads per state) are in
  kernels/lookahead_state.py.

The arrays are `FgdTable`'s bundles (kernels/fgd.py's docstring). Scores of nodes that changed
are written as `best_node` would; rollouts change nothing else that outlives the call.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from cardhour.scheduler.kernels.fgd import plain, refresh_node
from cardhour.scheduler.kernels.lookahead_cache import prepare_lists
from cardhour.scheduler.kernels.lookahead_choice import RANKED, ranking, winner
from cardhour.scheduler.kernels.lookahead_state import (
    bind,
    frag_change,
    frag_of,
    gpus_into,
    replay,
    score_of,
    undo,
)


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
        # 10 the node states this call reached, each once (intern_state): per touched node its
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
        np.empty((steps, RANKED)),  # the base rollout, per future: FGD's best nodes' scores
        np.empty((steps, RANKED), dtype=np.int64),  # the nodes, best first
        np.empty((steps, RANKED), dtype=np.int64),  # their share's GPU
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
            top, arg, g = ranking(
                t, index[t], i, n_touched, st, mt, tb, listing, memo, scratch, trail
            )
            if arg < 0:
                continue
            gpus_into(arg, t, g, done, st, tb, scratch)
            n_touched = bind(arg, t, n_touched, done, st, mt, tb, scratch)
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
            base_end[n] = frag_of(n, st, mt, memo, scratch)
        base_total = base + frag_change(n_touched, wsum, st, mt, memo, scratch)
        undo(n_touched, done, st, mt, tb, scratch)

        for c in range(candidates.shape[0]):
            node = candidates[c]
            gpus_into(node, first_t, gpu[first_t, node], 0, st, tb, scratch)
            n_touched = bind(node, first_t, 0, 0, st, mt, tb, scratch)
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
                    top, arg, g = winner(t, j, n_touched, st, mt, tb, listing, memo, scratch)
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
                                n_touched = replay(d, done, n_touched, st, mt, tb, scratch, trail)
                                done += 1
                        full = True
                        top, arg, g = winner(t, j, n_touched, st, mt, tb, listing, memo, scratch)
                    else:
                        for d in range(n_differ):
                            n = differ[d]
                            value, h = score_of(n, t, j, st, mt, tb, memo, scratch)
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
                                    n_touched = replay(
                                        d, done, n_touched, st, mt, tb, scratch, trail
                                    )
                                    done += 1
                gpus_into(arg, t, g, done, st, tb, scratch)
                n_touched = bind(arg, t, n_touched, done, st, mt, tb, scratch)
                done += 1
            if full:
                total = base + frag_change(n_touched, wsum, st, mt, memo, scratch)
            else:  # the base's total, but for the nodes that differ
                total = base_total
                for d in range(n_differ):
                    n = differ[d]
                    before = base_end[n] if in_base[n] else saved[row[n], 1]
                    after = frag_of(n, st, mt, memo, scratch)
                    total += round(after * wsum) - round(before * wsum)
            undo(n_touched, done, st, mt, tb, scratch)
            for d in range(n_differ):
                differs[differ[d]] = False
            volumes[c] += volume
            frags[c] += total / wsum
        for d in range(base_done):
            in_base[log_node[d]] = False
