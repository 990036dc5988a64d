"""What the lookahead's rollouts keep between calls (kernels/lookahead.py): per shape, a list
of its best nodes in order, and a memo of node scores and F_n(M) by node state.

- Each shape the rollouts can read has a list of its best nodes in order (`new_listing`). Nodes
  whose version moved are logged; a list is patched for the nodes logged since it was last used
  and rebuilt when too many were or it runs short (`prepare_lists`). Every node off a built list
  scores at most the list's bound, so FGD's choice among the nodes no rollout touched is the
  first untouched one listed.
- A touched node's score and a node's F_n(M) are memoised by (node, shape, the node's free CPU,
  memory, flags and per-GPU milli; `new_memo`, `memo_score`, `memo_frag`, which take the
  state's `state_hash` from the caller, who computes it once per state): the rollouts of one
  decision share their futures, so they put the same nodes into the same states again and again.

The arrays are `FgdTable`'s bundles (kernels/fgd.py's docstring).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from cardhour.scheduler.kernels.fgd import best_node, plain, refresh_node, score_node

_MIX = np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15, the golden-ratio multiplier
_FRAG = -1  # the memo's shape for a node's F_n(M)


# The memo is (rows, tags, [entries written]). A row per slot, float64: [node, shape, CPU,
# memory, flags, per-GPU milli..., value, GPU]; every field is an integer below 2**53 but the
# value (a score key or F_n(M)), so == on floats is exact. A state looks in the _WINDOW slots
# from its hash on, reading their tags first (one cache line: the state's hash, odd; 0 for an
# empty slot) and a row only where the tag matches; when they are all taken, a new one
# overwrites one of them in turn (an entry stays true forever, so the memo is a cache, never
# cleared).
_NODE, _SHAPE, _CPU = 0, 1, 2  # _CPU: where `write_state` writes the state
_GPUS = _CPU + 3  # after CPU, memory and flags
_WINDOW = 8


@plain(inline=True)
def _flags(n, st):
    """Node n's flags as one integer: 2 · schedulable + exclusive."""
    return 2 * np.int64(st[4][n]) + np.int64(st[5][n])


@plain(inline=True)
def holds_state(row, at, n, st):
    """Whether row[at:] holds node n's state now: free CPU, memory, flags, per-GPU milli."""
    gpu_free = st[0]
    if row[at] != st[1][n] or row[at + 1] != st[2][n] or row[at + 2] != _flags(n, st):
        return False
    for g in range(gpu_free.shape[1]):  # noqa: SIM110 (no generators in compiled code)
        if row[at + 3 + g] != gpu_free[n, g]:
            return False
    return True


@plain(inline=True)
def write_state(row, at, n, st):
    """Write node n's state now into row[at:], as `holds_state` reads it."""
    gpu_free = st[0]
    row[at], row[at + 1], row[at + 2] = st[1][n], st[2][n], _flags(n, st)
    for g in range(gpu_free.shape[1]):
        row[at + 3 + g] = gpu_free[n, g]


@plain(inline=True)
def state_hash(n, st):
    """A 64-bit hash of node n and its state now (free CPU, memory, flags, per-GPU milli)."""
    gpu_free, cpu_free, mem_free = st[0], st[1], st[2]
    h = np.int64(n) * _MIX
    h = (h ^ cpu_free[n]) * _MIX
    h = (h ^ mem_free[n]) * _MIX
    h = (h ^ _flags(n, st)) * _MIX
    for g in range(gpu_free.shape[1]):
        h = (h ^ gpu_free[n, g]) * _MIX
    return h


@plain(inline=True)
def _slot(n, t, hs, st, memo):
    """The memo slot of (node n, shape t, n's state now, whose `state_hash` is hs): (the one
    holding it, True) or (the one a new entry goes to, False), and the state's tag."""
    rows, tags, inserts = memo
    h = (hs ^ np.int64(t)) * _MIX
    tag = h | 1
    mask = rows.shape[0] - 1
    first = (h >> 32) & mask
    for w in range(_WINDOW):
        i = (first + w) & mask
        if tags[i] == 0:
            return i, False, tag
        if tags[i] != tag:
            continue
        row = rows[i]
        if row[_NODE] == n and row[_SHAPE] == t and holds_state(row, _CPU, n, st):
            return i, True, tag
    return (first + inserts[0] % _WINDOW) & mask, False, tag


@plain(inline=True)
def _remember(i, tag, n, t, st, memo, value, gpu):
    """Put (n, t, n's state now) → (value, gpu) in slot i."""
    rows, tags, inserts = memo
    width = st[0].shape[1]
    row = rows[i]
    row[_NODE], row[_SHAPE] = n, t
    write_state(row, _CPU, n, st)
    row[_GPUS + width] = value
    row[_GPUS + width + 1] = gpu
    tags[i] = tag
    inserts[0] += 1


@plain(inline=True)
def memo_score(n, t, hs, st, mt, tb, memo):
    """`score_node(n, t)`, memoised by n's state (hs: its `state_hash`)."""
    i, hit, tag = _slot(n, t, hs, st, memo)
    width = st[0].shape[1]
    if hit:
        return memo[0][i, _GPUS + width], np.int64(memo[0][i, _GPUS + width + 1])
    key, gpu = score_node(n, t, st, mt, tb)
    _remember(i, tag, n, t, st, memo, key, gpu)
    return key, gpu


@plain(inline=True)
def memo_frag(n, hs, st, mt, memo):
    """F_n(M) of node n as it is now, memoised by its state (hs: its `state_hash`)."""
    i, hit, tag = _slot(n, _FRAG, hs, st, memo)
    if hit:
        return memo[0][i, _GPUS + st[0].shape[1]]
    if mt[4][n] != st[3][n]:
        refresh_node(n, st, mt)
    value = mt[3][n]
    _remember(i, tag, n, _FRAG, st, memo, value, -1)
    return value


def new_listing(nodes: int, shapes: int, top: int = 128, log: int = 4096) -> tuple[np.ndarray, ...]:
    """Per-shape lists of best nodes for `rollouts`, kept between calls on a table with `shapes`
    score rows: (node versions when last logged, lists [shape, top], lengths, bounds, built,
    the last `log` nodes seen to change (a ring), per shape the changes logged when its list was
    last brought up to date, [changes logged]). Every node off a built list scores at most its
    shape's bound."""
    if top < 1 or log < 1:
        raise ValueError("a best-node list holds at least one node and the log one change")
    return (
        np.full(nodes, -1, dtype=np.int64),
        np.empty((shapes, top), dtype=np.int64),
        np.zeros(shapes, dtype=np.int64),
        np.full(shapes, -1.0),
        np.zeros(shapes, dtype=np.bool_),
        np.empty(log, dtype=np.int64),
        np.zeros(shapes, dtype=np.int64),
        np.zeros(1, dtype=np.int64),
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
    lists, lengths, bound, built = listing[1:5]
    best_node(t, st, mt, tb)
    lengths[t] = 0
    bound[t] = -1.0
    for n in range(key.shape[1]):
        value = key[t, n]
        if value >= 0 and value > bound[t]:
            _insert(t, n, value, key, lists, lengths, bound)
    built[t] = True


@nb.njit(cache=True)
def _relist(t, n, st, mt, tb, listing):
    """Node n changed and is off shape t's list: score it for shape t and put it into the list
    in order if it scores above the bound. Every node on the list must hold its listed score
    (`_insert` compares with them)."""
    key, gpu, stamp = tb[0], tb[1], tb[2]
    version = st[3]
    lists, lengths, bound = listing[1:4]
    if stamp[t, n] != version[n]:
        key[t, n], gpu[t, n] = score_node(n, t, st, mt, tb)
        stamp[t, n] = version[n]
    value = key[t, n]
    if value >= 0 and value > bound[t]:
        _insert(t, n, value, key, lists, lengths, bound)


@nb.njit(cache=True)
def prepare_lists(first_t, futures, st, mt, tb, listing):
    """Bring the lists of every shape the rollouts read up to date: log the nodes that changed
    since the last call, patch a list for those logged since it was last brought up to date,
    (re)build it when never built, when more changes were logged than the list holds or the log
    keeps, or when it ran short. Returns (shape → its row in the rollouts' scratch, or -1; rows)."""
    seen, lists, lengths, bound, built, changes, as_of, logged = listing
    version = st[3]
    top = lists.shape[1]
    ring = changes.shape[0]
    index = np.full(tb[0].shape[0], -1, dtype=np.int64)
    index[first_t] = 0
    count = 1
    for s in range(futures.shape[0]):
        for i in range(futures.shape[1]):
            t = futures[s, i]
            if index[t] < 0:
                index[t] = count
                count += 1
    for n in range(version.shape[0]):
        if seen[n] != version[n]:
            changes[logged[0] % ring] = n
            logged[0] += 1
            seen[n] = version[n]
    now = logged[0]
    mark = np.full(version.shape[0], -1, dtype=np.int64)  # per node: the list it is taken off
    for t in range(index.shape[0]):
        if index[t] < 0:
            continue
        pending = now - as_of[t]
        as_of[t] = now
        if built[t] and pending <= min(top, ring):
            # every changed node off the list first, then back in: one may already hold its new
            # score (FGD's own decisions rescore the table), and the list is ordered by scores
            for c in range(now - pending, now):
                mark[changes[c % ring]] = t
            size = 0
            for q in range(lengths[t]):
                n = lists[t, q]
                if mark[n] != t:
                    lists[t, size] = n
                    size += 1
            lengths[t] = size
            for c in range(now - pending, now):
                n = changes[c % ring]
                if mark[n] == t:  # once per node
                    mark[n] = -1
                    _relist(t, n, st, mt, tb, listing)
            if lengths[t] * 4 >= top or bound[t] < 0:
                continue
        _build(t, st, mt, tb, listing)
    return index, count


def new_memo(gpu_width: int, slots: int = 1 << 13) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A memo for `rollouts` on fleets of `gpu_width` GPUs per node, kept between calls:
    (rows, tags, [entries written]). `slots`: a power of two, at least the probe window."""
    if slots < _WINDOW or slots & (slots - 1):
        raise ValueError(f"memo slots must be a power of two, at least {_WINDOW}")
    return (
        np.zeros((slots, _GPUS + gpu_width + 2)),
        np.zeros(slots, dtype=np.int64),
        np.zeros(1, dtype=np.int64),
    )
