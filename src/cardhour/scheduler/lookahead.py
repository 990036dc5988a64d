"""Lookahead: near saturation, try a container on FGD's few best nodes and keep the one after
which sampled future pods fit best.

FGD scores a node by the fragmentation the next pod of the typical workload M would see. Once
`start` of the fleet's GPUs are allocated, a container's `candidates` best nodes by FGD (one per
distinct node state, FGD's tie order) are each tried in a rollout: the container is bound there,
then `horizon` pods drawn from M (the same draws for every candidate) are placed by FGD and
everything is undone (`FgdTable.rollout`). The candidate under which the drawn pods place the
most GPU request wins, then the least fragmentation F(M), then FGD's order. Below `start`, with
one candidate, or for a request that fits nowhere, it is FGD's decision.

Only M (the typical workload FGD itself uses) and the fleet as it is are read: nothing about the
pods still to come. docs/benchmarks/scheduler.md has what it gains and costs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cardhour.scheduler.fgd_table import FgdTable
from cardhour.scheduler.request import MILLI, Request
from cardhour.scheduler.state import FleetState


@dataclass(frozen=True)
class Lookahead:
    """How hard to look: nodes tried, future pods per rollout, rollouts per node, and the share of
    GPU capacity allocated from which it starts."""

    candidates: int = 10
    horizon: int = 75
    samples: int = 1
    start: float = 0.6

    def __post_init__(self) -> None:
        if self.candidates < 1 or self.horizon < 1 or self.samples < 1:
            raise ValueError("lookahead candidates, horizon and samples must be at least 1")
        if not 0 <= self.start <= 1:
            raise ValueError("lookahead start must be a share of capacity in [0, 1]")


def choose(table: FgdTable, req: Request, rng: np.random.Generator, how: Lookahead) -> int | None:
    """The node for container `req` (None: it fits nowhere). Changes nothing."""
    column = table.column(req)
    state = table.state
    best = distinct_best(state, column, how.candidates) if _allocated(state) >= how.start else []
    if len(best) < 2:
        node = int(column.argmax())
        return None if column[node] < 0 else node
    types, p = table.typical()
    draws = [types[row] for row in rng.choice(len(types), (how.samples, how.horizon), p=p)]
    outcome: dict[int, tuple[int, float]] = {}
    for node in best:
        volume, frag = 0, 0.0
        for future in draws:
            v, f = table.rollout(req, node, future)
            volume, frag = volume + v, frag + f
        outcome[node] = (-volume, frag)
    return min(best, key=lambda n: outcome[n])  # ties: the first, FGD's order


def _allocated(state: FleetState) -> float:
    capacity = int(state.gpu_count[state.schedulable].sum()) * MILLI
    if capacity == 0:
        return 0.0
    return 1 - int(state.gpu_free[state.schedulable].sum()) / capacity


def distinct_best(state: FleetState, column: np.ndarray, k: int) -> list[int]:
    """The `k` best nodes of a table column, one per distinct node state (GPUs free, whole vCPUs
    free, model, size and data centre: nodes equal in these roll out alike)."""
    chosen: list[int] = []
    seen: set[tuple[object, ...]] = set()
    for n in np.argsort(-column):
        if column[n] < 0:
            break
        key = (
            state.model[n], state.gpu_count[n], state.dc[n], int(state.cpu_free[n]) // 1000,
            tuple(sorted(state.gpu_free[n])),
        )  # fmt: skip
        if key not in seen:
            seen.add(key)
            chosen.append(int(n))
            if len(chosen) == k:
                break
    return chosen
