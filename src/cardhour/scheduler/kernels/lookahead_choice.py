"""FGD's choice of node for a future pod inside a lookahead rollout, inlined into
`kernels.lookahead._run`.

`winner` is FGD's node in the rollout's state: the first untouched node on the shape's list of
best nodes (kernels/lookahead_cache.py; a full scan only when every listed node is touched),
unless a touched node scores higher. `ranking` keeps the base rollout's `RANKED` best nodes of
a step in the same order (score, then the lower node), and whether they are every node that
fits, so a candidate's rollout can take the base's choice without scoring. Ties always go to
the lower node index, as `kernels.fgd.best_node`.

Contract: the arguments are those of kernels/lookahead_state.py (`scratch` and `trail` laid
out by `kernels.lookahead.rollouts`); nothing here changes the fleet's arrays, only `trail`'s
ranking rows and the call's per-state scores.
"""

from __future__ import annotations

# imported so that this module's source is in the kernels' cache stamp (kernels/numba_cache.py)
import numba  # noqa: F401

from cardhour.scheduler.kernels.fgd import ROLLOUT_VERSIONS, plain
from cardhour.scheduler.kernels.lookahead_state import score_of

RANKED = 4  # the base rollout's best nodes kept per step


@plain(inline=True)
def winner(t, j, n_touched, st, mt, tb, listing, memo, scratch):
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
        value, h = score_of(n, t, j, st, mt, tb, memo, scratch)
        if value > top or (value == top and value >= 0 and n < arg):
            top, arg, g = value, n, h
    return top, arg, g


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
def ranking(t, j, i, n_touched, st, mt, tb, listing, memo, scratch, trail):
    """The RANKED best nodes for shape t (listed column j) in the rollout's state, as step i's
    ranking (`winner`'s order, and whether it holds every node that fits); returns the best
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
            if ranked == RANKED:
                ranked += 1  # more nodes fit
                break
            _rank(key[t, n], n, gpu[t, n], i, RANKED, trail)
            ranked += 1
    if ranked == 0 and bound[t] >= 0:  # every listed node touched: scan the rest
        for n in range(key.shape[1]):
            if version[n] < ROLLOUT_VERSIONS and key[t, n] >= 0:
                _rank(key[t, n], n, gpu[t, n], i, RANKED, trail)
                ranked += 1
    elif ranked <= RANKED and bound[t] >= 0:
        ranked = -1  # the list ran out: nodes off it may fit, scoring at most the bound
    for q in range(n_touched):
        n = touched[q]
        value, h = score_of(n, t, j, st, mt, tb, memo, scratch)
        if value >= 0:
            _rank(value, n, h, i, RANKED, trail)
            if ranked >= 0:
                ranked += 1
    if ranked < 0:  # keep only what is known to rank above every node off the list
        size = 1  # the first listed node's score is above the bound
        while size < rank_count[i] and rank_key[i, size] > bound[t]:
            size += 1
        rank_count[i] = size
    rank_all[i] = 0 <= ranked <= RANKED
    if rank_count[i] == 0:
        return -1.0, -1, -1
    return rank_key[i, 0], rank_node[i, 0], rank_gpu[i, 0]
