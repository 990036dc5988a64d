"""GPU fragmentation as FGD measures it (Weng et al., USENIX ATC 2023; pkg/utils/frag.go).

For a node n with unallocated CPU C_n and per-GPU unallocated milli R_{n,g} (U_n = Σ_g R_{n,g})
and a task type m (CPU c_m, per-GPU milli d_m, GPU count k_m, allowed models T_m):
- F_n(m) = Σ_g R_{n,g}·1[R_{n,g} < d_m] when m fits the node (d_m > 0, the node's model in T_m,
  at least k_m GPUs with R ≥ d_m, C_n ≥ c_m); otherwise F_n(m) = U_n (every idle GPU is a
  fragment to a task that cannot use it, including a CPU-only task).
- F_n(M) = Σ_m p_m·F_n(m) over the typical workload M; the cluster's F(M) = Σ_n F_n(M).

The meter caches per-node sufficient statistics (GPUs that fit each type, milli too small for
each type) and recomputes only the rows whose `FleetState.version` moved.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from cardhour.scheduler.request import Request
from cardhour.scheduler.state import FleetState

POPULARITY = 0.95  # keep the most common task types until they cover 95% of tasks (FGD's setting)


@dataclass(frozen=True)
class TypicalWorkload:
    """The target workload M: task types and their probabilities p (summing to 1)."""

    cpu: np.ndarray  # c_m, milli
    milli: np.ndarray  # d_m, per-GPU milli (0 = CPU-only)
    count: np.ndarray  # k_m
    models: tuple[frozenset[str], ...]  # T_m (empty = any)
    p: np.ndarray
    # Integer weights with p = weight / weight.sum(), when known: F_n(M) is then computed
    # exactly, so equal fragment amounts give a Δ of exactly 0 (FGD's ties depend on it).
    weight: np.ndarray | None = None

    @classmethod
    def from_requests(
        cls,
        requests: Iterable[Request],
        popularity: float = POPULARITY,
        gpu_weighted: bool = False,
    ) -> TypicalWorkload:
        """FGD's `GetTypicalPods`: count tasks by (cpu, milli, count, models), keep the most common
        until they cover `popularity` of all tasks, renormalise. With `gpu_weighted`, a type's
        weight is its total GPU request instead of its task count (CPU-only types keep weight 1
        per task, scaled to one whole GPU)."""
        counts: Counter[tuple[int, int, int, frozenset[str]]] = Counter()
        for r in requests:
            key = (r.cpu_milli, r.gpu_milli, r.num_gpu, r.gpu_models)
            counts[key] += max(r.num_gpu * r.gpu_milli, 1000) if gpu_weighted else 1
        if not counts:
            raise ValueError("the typical workload needs at least one task")
        total = sum(counts.values())
        kept: list[tuple[tuple[int, int, int, frozenset[str]], int]] = []
        covered = 0
        # Counter.most_common is stable for equal counts (first seen first), as Go's sort is not;
        # ties at the cut are rare and only move a tail type in or out.
        for key, n in counts.most_common():
            kept.append((key, n))
            covered += n
            if covered >= popularity * total:
                break
        weight = np.array([n for _, n in kept], dtype=np.float64)  # integer-valued
        return cls(
            cpu=np.array([k[0] for k, _ in kept], dtype=np.int64),
            milli=np.array([k[1] for k, _ in kept], dtype=np.int64),
            count=np.array([k[2] for k, _ in kept], dtype=np.int64),
            models=tuple(k[3] for k, _ in kept),
            p=weight / weight.sum(),
            weight=weight,
        )

    def __len__(self) -> int:
        return len(self.p)

    def access(self, models: Sequence[str]) -> np.ndarray:
        """[len(models) + 1, M] bool: may type m run on model i? The last row is "no GPU model"."""
        table = np.ones((len(models) + 1, len(self)), dtype=bool)
        for m, allowed in enumerate(self.models):
            if allowed:
                table[:, m] = [model in allowed for model in models] + [False]
        return table


class FragMeter:
    """F_n(M) for every node of one FleetState, kept current by version."""

    def __init__(self, state: FleetState, workload: TypicalWorkload) -> None:
        self.state = state
        self.w = workload
        n, m = len(state), len(workload)
        # [N, M]: type m is a GPU task allowed on node n's model (model -1 → the last row).
        self.access = workload.access(state.models)[state.model] & (workload.milli > 0)
        # Sufficient statistics, integer-valued float64 (exact below 2**53, see `node_frag`).
        self.fit = np.zeros((n, m))  # GPUs with R ≥ d_m
        self.small = np.zeros((n, m))  # Σ R over GPUs with R < d_m
        self.idle = np.zeros(n)  # U_n
        self.frag = np.zeros(n, dtype=np.float64)  # F_n(M)
        self._seen = np.full(n, -1, dtype=np.int64)
        self.refresh()

    def refresh(self) -> None:
        """Recompute the rows whose node changed since the last refresh."""
        stale = np.flatnonzero(self._seen != self.state.version)
        if stale.size == 0:
            return
        s = self.state
        r = s.gpu_free[stale]  # [S, G]
        d = self.w.milli
        ge = r[:, :, None] >= d[None, None, :]  # [S, G, M]
        self.fit[stale] = ge.sum(axis=1)
        self.small[stale] = np.where(ge, 0, r[:, :, None]).sum(axis=1)
        self.idle[stale] = r.sum(axis=1)
        self.frag[stale] = self.node_frag(
            self.fit[stale], self.small[stale], self.idle[stale], s.cpu_free[stale], stale
        )
        self._seen[stale] = s.version[stale]

    def node_frag(
        self,
        fit: np.ndarray,
        small: np.ndarray,
        idle: np.ndarray,
        cpu_free: np.ndarray,
        nodes: np.ndarray,
        weights: np.ndarray | None = None,
    ) -> np.ndarray:
        """F_n(M) from sufficient statistics; rows of `fit`/`small` align with `nodes`. With
        `weights`, Σ_m weights_m·F_n(m) instead (other weightings of the types, experiments)."""
        w = self.w
        fits = (fit >= w.count) & (cpu_free[:, None] >= w.cpu) & self.access[nodes]
        per_type = np.where(fits, small, idle[:, None])
        if weights is not None:
            return np.asarray(per_type @ weights)
        if w.weight is not None:
            # Integer-valued float64 sums stay below 2**53 (≤ 8,000 milli × weights), so BLAS
            # adds them exactly in any order; one division then gives equal F for equal inputs.
            return np.asarray(per_type @ w.weight) / w.weight.sum()
        return np.asarray(per_type @ w.p)

    def total(self) -> float:
        self.refresh()
        return float(self.frag.sum())
