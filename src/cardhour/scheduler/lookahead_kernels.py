"""Compiled loops behind the lookahead (lookahead.py): FGD's few best distinct nodes, and every
rollout of one decision in one call.

`rollouts` returns what `fgd_kernels.rollout` returns for each candidate and sample, exactly
(`tests/scheduler/test_lookahead.py` compares them), with far less work per future pod:

- Each shape the rollouts can read has a list of its best nodes in order (`new_listing`, kept
  between calls: patched for the nodes whose version moved since, rebuilt when it was not kept
  up to date or runs short). A node no rollout has touched keeps its score, so FGD's choice among
  the untouched nodes is the first untouched one on the list (a full scan only when the list
  runs out); the touched nodes, at most one per pod placed, are scored one by one.
- A touched node's score and its F_n(M) are memoised by (node, shape, the node's free CPU,
  memory, flags and per-GPU milli; `new_memo`, kept between calls): the rollouts of one decision
  share their futures, so they put the same nodes into the same states again and again.

The arrays are `FgdTable`'s bundles (fgd_kernels.py's docstring). Scores of nodes that changed
are written as `best_node` would; rollouts change nothing else that outlives the call.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from cardhour.scheduler.fgd_kernels import (
    MILLI,
    ROLLOUT_VERSIONS,
    best_node,
    plain,
    refresh_node,
    score_node,
)

_MIX = np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15, the golden-ratio multiplier
_FRAG = -1  # the memo's shape for a node's F_n(M)


@nb.njit(cache=True)
def allocated(gpu_free, gpu_count, schedulable):
    """The share of the schedulable nodes' GPU capacity allocated (0 with no capacity)."""
    capacity = 0
    free = 0
    for n in range(gpu_free.shape[0]):
        if schedulable[n]:
            capacity += gpu_count[n] * MILLI
            for g in range(gpu_free.shape[1]):
                free += gpu_free[n, g]
    return 0.0 if capacity == 0 else 1 - free / capacity


@nb.njit(cache=True)
def distinct_best(column, model, gpu_count, dc, cpu_free, gpu_free, k):
    """The indices of the `k` best nodes of `column` (key >= 0, highest first), one per distinct
    node state: (model, GPU count, data centre, whole vCPUs free, sorted per-GPU free milli)."""
    # Usually the first few dozen nodes hold k distinct states: sort the best 8k, and every
    # node only when those run out.
    few = np.empty(8 * k, dtype=np.int64)
    size = 0
    for n in range(column.shape[0]):
        v = column[n]
        if v < 0 or (size == few.shape[0] and v <= column[few[size - 1]]):
            continue
        if size < few.shape[0]:
            size += 1
        q = size - 1
        while q > 0 and column[few[q - 1]] < v:
            few[q] = few[q - 1]
            q -= 1
        few[q] = n
    chosen, found = _distinct(few[:size], column, model, gpu_count, dc, cpu_free, gpu_free, k)
    if found < k and size == few.shape[0]:
        order = np.argsort(-column)
        chosen, found = _distinct(order, column, model, gpu_count, dc, cpu_free, gpu_free, k)
    return chosen[:found]


@nb.njit(cache=True)
def _distinct(order, column, model, gpu_count, dc, cpu_free, gpu_free, k):
    width = gpu_free.shape[1]
    chosen = np.empty(k, dtype=np.int64)
    keys = np.empty((k, 4 + width), dtype=np.int64)
    row = np.empty(4 + width, dtype=np.int64)
    found = 0
    for n in order:
        if column[n] < 0:
            break
        row[0], row[1], row[2], row[3] = model[n], gpu_count[n], dc[n], cpu_free[n] // 1000
        for g in range(width):  # insertion sort of the GPUs' free milli
            v = gpu_free[n, g]
            j = g
            while j > 0 and row[4 + j - 1] > v:
                row[4 + j] = row[4 + j - 1]
                j -= 1
            row[4 + j] = v
        seen = False
        for c in range(found):
            same = True
            for f in range(4 + width):
                if keys[c, f] != row[f]:
                    same = False
                    break
            if same:
                seen = True
                break
        if not seen:
            keys[found] = row
            chosen[found] = n
            found += 1
            if found == k:
                break
    return chosen, found


# The memo is one float64 array, a row per slot, so a probe reads one row (two cache lines):
# [used, node, shape, CPU, memory, flags, per-GPU milli..., value, GPU]. Every field is an
# integer below 2**53 but the value (a score key or F_n(M)), so == on floats is exact. A state
# looks in the _WINDOW slots from its hash on; when they are all taken, a new one overwrites one
# of them in turn (an entry stays true forever, so the memo is a cache, never cleared).
_USED, _NODE, _SHAPE, _CPU, _MEM, _FLAGS, _GPUS = 0, 1, 2, 3, 4, 5, 6
_WINDOW = 8


@plain(inline=True)
def _slot(n, t, st, memo, inserts):
    """The memo slot of (node n, shape t, n's state now): the one holding it (True), or the one
    a new entry goes to (False)."""
    gpu_free, cpu_free, mem_free = st[0], st[1], st[2]
    width = gpu_free.shape[1]
    flags = 2 * np.int64(st[4][n]) + np.int64(st[5][n])  # schedulable, exclusive
    h = (np.int64(n) * _MIX) ^ np.int64(t)
    h = (h ^ cpu_free[n]) * _MIX
    h = (h ^ mem_free[n]) * _MIX
    h = (h ^ flags) * _MIX
    for g in range(width):
        h = (h ^ gpu_free[n, g]) * _MIX
    mask = memo.shape[0] - 1
    first = (h >> 32) & mask
    for w in range(_WINDOW):
        i = (first + w) & mask
        row = memo[i]
        if row[_USED] == 0:
            return i, False
        if (
            row[_NODE] == n and row[_SHAPE] == t and row[_CPU] == cpu_free[n]
            and row[_MEM] == mem_free[n] and row[_FLAGS] == flags
        ):  # fmt: skip
            same = True
            for g in range(width):
                if row[_GPUS + g] != gpu_free[n, g]:
                    same = False
                    break
            if same:
                return i, True
    return (first + inserts[0] % _WINDOW) & mask, False


@plain(inline=True)
def _remember(i, n, t, st, memo, inserts, value, gpu):
    """Put (n, t, n's state now) → (value, gpu) in slot i."""
    gpu_free = st[0]
    width = gpu_free.shape[1]
    row = memo[i]
    row[_USED], row[_NODE], row[_SHAPE] = 1, n, t
    row[_CPU], row[_MEM] = st[1][n], st[2][n]
    row[_FLAGS] = 2 * np.int64(st[4][n]) + np.int64(st[5][n])
    for g in range(width):
        row[_GPUS + g] = gpu_free[n, g]
    row[_GPUS + width] = value
    row[_GPUS + width + 1] = gpu
    inserts[0] += 1


@plain(inline=True)
def _score(n, t, st, mt, tb, memo, inserts):
    """`score_node(n, t)`, memoised by n's state."""
    i, hit = _slot(n, t, st, memo, inserts)
    width = st[0].shape[1]
    if hit:
        return memo[i, _GPUS + width], np.int64(memo[i, _GPUS + width + 1])
    key, gpu = score_node(n, t, st, mt, tb)
    _remember(i, n, t, st, memo, inserts, key, gpu)
    return key, gpu


@plain(inline=True)
def _frag(n, st, mt, memo, inserts):
    """F_n(M) of node n as it is now, memoised by its state."""
    i, hit = _slot(n, _FRAG, st, memo, inserts)
    if hit:
        return memo[i, _GPUS + st[0].shape[1]]
    if mt[4][n] != st[3][n]:
        refresh_node(n, st, mt)
    value = mt[3][n]
    _remember(i, n, _FRAG, st, memo, inserts, value, -1)
    return value


def new_listing(nodes: int, shapes: int, top: int = 24) -> tuple[np.ndarray, ...]:
    """Per-shape lists of best nodes for `rollouts`, kept between calls on a table with `shapes`
    score rows: (node versions when last brought up to date, lists [shape, top], lengths,
    bounds, built). Every node off a built list scores at most its shape's bound."""
    if top < 1:
        raise ValueError("a best-node list holds at least one node")
    return (
        np.full(nodes, -1, dtype=np.int64),
        np.empty((shapes, top), dtype=np.int64),
        np.zeros(shapes, dtype=np.int64),
        np.full(shapes, -1.0),
        np.zeros(shapes, dtype=np.bool_),
    )


@plain(inline=True)
def _insert(t, n, value, key, lists, lengths, bound):
    """Put node n (score `value` > bound[t]) into shape t's list in order; a full list drops its
    last node, which becomes the new bound."""
    top = lists.shape[1]
    size = lengths[t]
    if size == top:
        last = key[t, lists[t, top - 1]]
        if value <= last:
            bound[t] = max(bound[t], value)
            return
        bound[t] = max(bound[t], last)
        size -= 1
    q = size
    while q > 0 and key[t, lists[t, q - 1]] < value:
        lists[t, q] = lists[t, q - 1]
        q -= 1
    lists[t, q] = n
    lengths[t] = size + 1


@nb.njit(cache=True)
def _build(t, st, mt, tb, listing):
    """Score shape t on every stale node and list its best nodes afresh."""
    key = tb[0]
    _, lists, lengths, bound, built = listing
    best_node(t, st, mt, tb)
    lengths[t] = 0
    bound[t] = -1.0
    for n in range(key.shape[1]):
        value = key[t, n]
        if value >= 0 and value > bound[t]:
            _insert(t, n, value, key, lists, lengths, bound)
    built[t] = True


@nb.njit(cache=True)
def _patch(t, n, st, mt, tb, listing):
    """Node n changed: score it for shape t and move it in (or out of) shape t's list."""
    key, gpu, stamp = tb[0], tb[1], tb[2]
    version = st[3]
    _, lists, lengths, bound, _ = listing
    if stamp[t, n] != version[n]:
        key[t, n], gpu[t, n] = score_node(n, t, st, mt, tb)
        stamp[t, n] = version[n]
    size = lengths[t]
    for q in range(size):
        if lists[t, q] == n:
            for r in range(q, size - 1):
                lists[t, r] = lists[t, r + 1]
            lengths[t] = size - 1
            break
    value = key[t, n]
    if value >= 0 and value > bound[t]:
        _insert(t, n, value, key, lists, lengths, bound)


@nb.njit(cache=True)
def _prepare(first_t, futures, st, mt, tb, listing):
    """Bring the lists of every shape the rollouts read up to date: patch the nodes that changed
    since the last call, (re)build lists never built, untracked or run short. Returns (shape →
    its row in the rollouts' scratch, or -1; rows)."""
    seen, lists, lengths, bound, built = listing
    version = st[3]
    top = lists.shape[1]
    index = np.full(tb[0].shape[0], -1, dtype=np.int64)
    index[first_t] = 0
    count = 1
    for s in range(futures.shape[0]):
        for i in range(futures.shape[1]):
            t = futures[s, i]
            if index[t] < 0:
                index[t] = count
                count += 1
    changed = np.empty(version.shape[0], dtype=np.int64)
    n_changed = 0
    for n in range(version.shape[0]):
        if seen[n] != version[n]:
            changed[n_changed] = n
            n_changed += 1
            seen[n] = version[n]
    for t in range(index.shape[0]):
        if index[t] < 0:
            if n_changed:
                built[t] = False  # its nodes' changes are not tracked
            continue
        if built[t] and n_changed <= top:
            for c in range(n_changed):
                _patch(t, changed[c], st, mt, tb, listing)
            if lengths[t] * 4 >= top or bound[t] < 0:
                continue
        _build(t, st, mt, tb, listing)
    return index, count


def new_memo(gpu_width: int, slots: int = 1 << 13) -> tuple[np.ndarray, np.ndarray]:
    """A memo for `rollouts` on fleets of `gpu_width` GPUs per node, kept between calls:
    (rows, [entries written]). `slots`: a power of two, at least the probe window."""
    if slots < _WINDOW or slots & (slots - 1):
        raise ValueError(f"memo slots must be a power of two, at least {_WINDOW}")
    return np.zeros((slots, _GPUS + gpu_width + 2)), np.zeros(1, dtype=np.int64)


@nb.njit(cache=True)
def rollouts(first_t, candidates, futures, st, mt, tb, listing, memo):
    """For each candidate node c: (Σ_s GPU milli placed, Σ_s F(M) after) over the rollouts
    "shape `first_t` on c, then the shapes `futures[s]` in order by FGD where they fit", s in
    order — what `fgd_kernels.rollout` returns, summed. Everything is put back."""
    for c in range(candidates.shape[0]):
        if tb[0][first_t, candidates[c]] < 0:
            raise ValueError("a lookahead candidate does not fit the request")
    index, n_lists = _prepare(first_t, futures, st, mt, tb, listing)
    steps = futures.shape[1] + 1
    width = st[0].shape[1]
    rows, inserts = memo
    n_types = mt[0].shape[1]
    scratch = (
        np.empty(steps, dtype=np.int64),  # touched nodes, in order of first touch
        np.empty(steps, dtype=np.int64),  # their version before
        np.empty((steps, n_types)),  # their meter rows before: fit
        np.empty((steps, n_types)),  # small
        np.empty((steps, 3)),  # idle, frag, seen
        np.empty((steps, n_lists)),  # their scores per listed column
        np.empty((steps, n_lists), dtype=np.int64),  # the share's GPU for those
        np.empty((steps, n_lists), dtype=np.int64),  # the version each was scored at
        np.empty(steps, dtype=np.int64),  # placements: node
        np.empty(steps, dtype=np.int64),  # shape
        np.empty((steps, width), dtype=np.int64),  # GPUs
        np.empty(steps, dtype=np.int64),  # number of GPUs
    )
    volumes = np.zeros(candidates.shape[0], dtype=np.int64)
    frags = np.zeros(candidates.shape[0])
    _run(
        first_t,
        candidates,
        futures,
        st,
        mt,
        tb,
        index,
        listing,
        rows,
        inserts,
        scratch,
        volumes,
        frags,
    )
    return volumes, frags


@plain()
def _run(
    first_t, candidates, futures, st, mt, tb, index, listing, memo, inserts, scratch, volumes, frags
):
    gpu_free, cpu_free, mem_free, version = st[0], st[1], st[2], st[3]
    fit, small, idle, frag, seen = mt[0], mt[1], mt[2], mt[3], mt[4]
    wsum = mt[10][0]
    key, gpu, shapes, counter = tb[0], tb[1], tb[4], tb[6]
    best, lengths, bound = listing[1], listing[2], listing[3]
    touched, first_version, saved_fit, saved_small, saved = scratch[:5]
    tkey, tgpu, stamp, nodes, kinds, taken, counts = scratch[5:]
    n_nodes, width = gpu_free.shape
    samples, horizon = futures.shape

    base = 0.0  # Σ_n round(F_n·wsum) of the fleet as it is: integer-valued, so exact
    for n in range(n_nodes):
        if seen[n] != version[n]:
            refresh_node(n, st, mt)
        base += round(frag[n] * wsum)

    for c in range(candidates.shape[0]):
        for s in range(samples):
            n_touched = 0
            done = 0
            volume = 0
            for i in range(horizon + 1):
                if i == 0:
                    t = first_t
                    arg = candidates[c]
                    g = gpu[t, arg]
                else:
                    t = futures[s, i - 1]
                    j = index[t]
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
                        for n in range(n_nodes):
                            if version[n] < ROLLOUT_VERSIONS and key[t, n] > top:
                                top, arg, g = key[t, n], n, gpu[t, n]
                    for q in range(n_touched):
                        n = touched[q]
                        if stamp[q, j] != version[n]:
                            tkey[q, j], tgpu[q, j] = _score(n, t, st, mt, tb, memo, inserts)
                            stamp[q, j] = version[n]
                        value = tkey[q, j]
                        if value > top or (value == top and value >= 0 and n < arg):
                            top, arg, g = value, n, tgpu[q, j]
                    if arg < 0:
                        continue
                if version[arg] < ROLLOUT_VERSIONS:  # first touch: keep what to put back
                    touched[n_touched] = arg
                    first_version[n_touched] = version[arg]
                    for m in range(fit.shape[1]):
                        saved_fit[n_touched, m] = fit[arg, m]
                        saved_small[n_touched, m] = small[arg, m]
                    saved[n_touched, 0] = idle[arg]
                    saved[n_touched, 1] = frag[arg]
                    saved[n_touched, 2] = seen[arg]
                    for m in range(stamp.shape[1]):
                        stamp[n_touched, m] = -1
                    n_touched += 1
                k, milli = shapes[t, 2], shapes[t, 3]
                if k == 1 and milli < MILLI:
                    taken[done, 0] = g
                    counts[done] = 1
                else:  # the first k whole free GPUs, as fgd_kernels._gpus_for
                    m = 0
                    for h in range(width):
                        if m == k:
                            break
                        if gpu_free[arg, h] == MILLI:
                            taken[done, m] = h
                            m += 1
                    counts[done] = m
                cpu_free[arg] -= shapes[t, 0]
                mem_free[arg] -= shapes[t, 1]
                for h in range(counts[done]):
                    gpu_free[arg, taken[done, h]] -= milli
                nodes[done] = arg
                kinds[done] = t
                done += 1
                counter[0] += 1
                version[arg] = counter[0]
                if i > 0:
                    volume += k * milli
            total = base
            for q in range(n_touched):
                total += round(_frag(touched[q], st, mt, memo, inserts) * wsum)
                total -= round(saved[q, 1] * wsum)
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
            volumes[c] += volume
            frags[c] += total / wsum
