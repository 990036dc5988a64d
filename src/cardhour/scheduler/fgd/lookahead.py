"""Lookahead: try a container on FGD's few best nodes and keep the one after which sampled
future pods fit best.

FGD scores a node by the fragmentation the next pod of the typical workload M would see. Once
`start` of the fleet's GPUs are allocated (by default from the first container on), a
container's `candidates` best nodes by FGD (one per distinct node state, FGD's tie order) are
each tried in a rollout: the container is bound there, then `horizon` pods drawn from M (the
same draws for every candidate) are placed by FGD and everything is undone
(`kernels.lookahead.rollouts`: all of a decision's rollouts in one compiled call, exactly what
`FgdTable.rollout` gives one by one, several times faster). A container with a fraction of a
GPU gets `share_samples` rollouts per candidate, every other container `samples`, each rollout
with its own draws. The candidate under which the drawn pods place the most GPU request (summed
over its rollouts) wins, then the least fragmentation F(M), then FGD's order. Below `start`,
with one candidate, or for a request that fits nowhere, it is FGD's decision.

Only M (the typical workload FGD itself uses) and the fleet as it is are read: nothing about the
pods still to come. docs/benchmarks/scheduler.md has what it gains and costs.
"""

from __future__ import annotations

from dataclasses import dataclass
from weakref import WeakKeyDictionary

import numpy as np

from cardhour.scheduler.fgd.table import FgdTable
from cardhour.scheduler.kernels import lookahead as kern
from cardhour.scheduler.kernels import lookahead_cache as cache
from cardhour.scheduler.kernels import lookahead_candidates as pick
from cardhour.scheduler.request import Kind, Request
from cardhour.scheduler.state import FleetState


@dataclass
class _Workspace:
    """What one table's decisions reuse: M's task types and the cumulative distribution to
    draw them from, the rollouts' memo of node scores by node state, and their lists of best
    nodes per shape (kernels/lookahead_cache.py)."""

    types: np.ndarray
    cdf: np.ndarray
    memo: tuple[np.ndarray, np.ndarray, np.ndarray]
    listing: tuple[np.ndarray, ...] = ()


_WORKSPACES: WeakKeyDictionary[FgdTable, _Workspace] = WeakKeyDictionary()


def _workspace(table: FgdTable) -> _Workspace:
    ws = _WORKSPACES.get(table)
    if ws is None:
        types, p = table.typical()
        cdf = p.cumsum()
        cdf /= cdf[-1]
        memo = cache.new_memo(table.state.gpu_free.shape[1])
        ws = _WORKSPACES[table] = _Workspace(types, cdf, memo)
    return ws


@dataclass(frozen=True)
class Lookahead:
    """How hard to look: nodes tried, future pods per rollout, rollouts per node (for a container
    with a fraction of a GPU: `share_samples`), and the share of GPU capacity allocated from
    which it starts."""

    candidates: int = 10
    horizon: int = 75
    samples: int = 1
    start: float = 0.0
    share_samples: int = 2

    def __post_init__(self) -> None:
        if min(self.candidates, self.horizon, self.samples, self.share_samples) < 1:
            raise ValueError(
                "lookahead candidates, horizon, samples and share samples must be at least 1"
            )
        if not 0 <= self.start <= 1:
            raise ValueError("lookahead start must be a share of capacity in [0, 1]")


def choose(table: FgdTable, req: Request, rng: np.random.Generator, how: Lookahead) -> int | None:
    """The node for container `req` (None: it fits nowhere). Changes nothing."""
    column = table.column(req)
    state = table.state
    share = pick.allocated(state.gpu_free, state.gpu_count, state.schedulable)
    best = distinct_best(state, column, how.candidates) if share >= how.start else []
    if len(best) < 2:
        node = int(column.argmax())
        return None if column[node] < 0 else node
    ws = _workspace(table)
    # rng.choice(len(types), size, p=p) as numpy computes it (the same draws), without its
    # checks of p on every call
    samples = how.share_samples if req.kind is Kind.SHARE else how.samples
    futures = ws.types[ws.cdf.searchsorted(rng.random((samples, how.horizon)), side="right")]
    t = table.shape(req)
    # FgdTable's array bundles (kernels/fgd.py), read after every shape above is registered
    st, mt, tb = table._st, table._mt, table._tb
    shapes, nodes = tb[0].shape
    if not ws.listing or ws.listing[1].shape[0] != shapes:  # first use, or the table grew
        ws.listing = cache.new_listing(nodes, shapes)
    candidates = np.array(best, dtype=np.int64)
    volumes, frags = kern.rollouts(t, candidates, futures, st, mt, tb, ws.listing, ws.memo)
    # the most GPU placed, then the least F(M); ties: the first, FGD's order
    return best[min(range(len(best)), key=lambda i: (-volumes[i], frags[i]))]


def distinct_best(state: FleetState, column: np.ndarray, k: int) -> list[int]:
    """The `k` best nodes of a table column, one per distinct node state (GPUs free, whole vCPUs
    free, model, size and data centre: nodes equal in these roll out alike)."""
    chosen = pick.distinct_best(
        np.ascontiguousarray(column), state.model, state.gpu_count, state.dc, state.cpu_free,
        state.gpu_free, k,
    )  # fmt: skip
    return [int(n) for n in chosen]
