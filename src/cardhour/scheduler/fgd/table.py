"""FGD's container decisions with scores cached per (node, request shape), compiled.

`Scheduler("fgd")` scores every node for every request in numpy. A node's FGD score for a request
depends only on that node's state and the request's shape (CPU, memory, GPU count and milli,
models), so `FgdTable` keeps one score column per shape seen and rescores only the nodes whose
`FleetState.version` moved since that column was last read, in compiled loops (kernels/fgd.py).
Its decisions are the engine's: the same filters, the same integer
score, the same tie order, the same GPUs inside the node; `tests/scheduler/test_fgd_table.py`
replays traces both ways and compares every placement. It serves what places many pods on one
state: trace replay and lookahead (`rollout`).

`keep_whole=True` adds the `keep-whole` tie-break of our `cardhour` policy (profiles.py).
"""

from __future__ import annotations

import numpy as np

from cardhour.scheduler.frag import FragMeter, TypicalWorkload
from cardhour.scheduler.gpusel import whole_gpus
from cardhour.scheduler.kernels import fgd as kern
from cardhour.scheduler.request import Kind, Placement, Request
from cardhour.scheduler.state import FleetState

_CHUNK = 64  # shapes (score rows) added at a time
Shape = tuple[int, int, int, int, frozenset[str], str | None]


class FgdTable:
    """Decide container placements on one `FleetState` as FGD does (see the module docstring).

    `rank[i]` is node i's place in the tie order (lowest first). The table only reads the state
    (a rollout changes it and restores it): callers `assume`/`forget` placements on it as usual,
    and the versions tell what to rescore. Not thread-safe.
    """

    def __init__(
        self,
        state: FleetState,
        workload: TypicalWorkload,
        rank: np.ndarray,
        keep_whole: bool = False,
    ) -> None:
        n = len(state)
        if len(rank) != n:
            raise ValueError(f"tie rank has {len(rank)} entries for {n} nodes")
        self.state = state
        self.keep_whole = keep_whole
        if workload.weight is None:
            raise ValueError("FgdTable needs the typical workload's integer weights (exact sums)")
        self.meter = FragMeter(state, workload)
        m = self.meter
        weight = workload.weight
        self._mt = (
            m.fit, m.small, m.idle, m.frag, m._seen, m.access,
            workload.milli.astype(np.int64), workload.cpu.astype(np.int64),
            workload.count.astype(np.int64), weight.astype(np.float64),
            np.array([weight.sum()], dtype=np.float64),
        )  # fmt: skip
        self._st = (
            state.gpu_free, state.cpu_free, state.mem_free, state.version, state.schedulable,
            state.exclusive, state.model, state.gpu_count, state.dc,
        )  # fmt: skip
        # Earlier in the tie order = larger; below 1 so it never outweighs one score step.
        self._order = (n - 1 - np.asarray(rank, dtype=np.float64)) / n
        self._counter = np.array([kern.ROLLOUT_VERSIONS], dtype=np.int64)
        self._shapes: dict[Shape, int] = {}
        self._shape_rows = np.empty((0, 6), dtype=np.int64)
        self._allowed = np.empty((0, len(state.models) + 1), dtype=bool)
        # per shape (row) and node: score + tie fraction, -1 where it does not fit; the share's
        # GPU, else -1; the node version each entry was scored at
        self.key = np.empty((0, n))
        self.gpu = np.empty((0, n), dtype=np.int64)
        self._stamp = np.empty((0, n), dtype=np.int64)
        self._tb = self._tables()
        self._typical: np.ndarray | None = None

    def shape(self, req: Request) -> int:
        """The column of `req`'s shape (registered on first sight)."""
        if req.kind not in (Kind.CPU, Kind.SHARE, Kind.GPUS):
            raise ValueError(f"request {req.id}: FgdTable places containers, not {req.kind}")
        key = (
            req.cpu_milli, req.memory_mib, req.num_gpu, req.gpu_milli, req.gpu_models,
            req.data_centre,
        )  # fmt: skip
        t = self._shapes.get(key)
        if t is not None:
            return t
        t = len(self._shapes)
        self._shapes[key] = t
        n = len(self.state)
        if t == self.key.shape[0]:
            self.key = np.vstack([self.key, np.full((_CHUNK, n), -1.0)])
            self.gpu = np.vstack([self.gpu, np.full((_CHUNK, n), -1, dtype=np.int64)])
            self._stamp = np.vstack([self._stamp, np.full((_CHUNK, n), -1, dtype=np.int64)])
            self._shape_rows = np.vstack([self._shape_rows, np.zeros((_CHUNK, 6), np.int64)])
            self._allowed = np.vstack(
                [self._allowed, np.zeros((_CHUNK, self._allowed.shape[1]), dtype=bool)]
            )
        keep = int(self.keep_whole and req.num_gpu > 0)
        dcs = self.state.dcs
        # An unknown data centre matches no node (code -2), as the engine's filter.
        dc = (
            -1
            if req.data_centre is None
            else (dcs.index(req.data_centre) if req.data_centre in dcs else -2)
        )
        self._shape_rows[t] = (req.cpu_milli, req.memory_mib, req.num_gpu, req.gpu_milli, keep, dc)
        models = self.state.models
        # The last entry is a GPU node without a model name: only unconstrained requests.
        anything = not req.gpu_models
        self._allowed[t] = [anything or m in req.gpu_models for m in models] + [anything]
        self._tb = self._tables()
        return t

    def typical(self) -> tuple[np.ndarray, np.ndarray]:
        """(columns, probabilities) of the typical workload M's task types (memory 0: M has
        none), for drawing future pods."""
        if self._typical is None:
            w = self.meter.w
            rows = zip(w.cpu, w.milli, w.count, w.models, strict=True)
            shapes = [
                self.shape(Request(f"m{m}", int(c), 0, int(k), int(d), models))
                for m, (c, d, k, models) in enumerate(rows)
            ]
            self._typical = np.array(shapes, dtype=np.int64)
        return self._typical, self.meter.w.p

    def _tables(self) -> tuple[np.ndarray, ...]:
        return (
            self.key, self.gpu, self._stamp, self._order, self._shape_rows, self._allowed,
            self._counter,
        )  # fmt: skip

    def column(self, req: Request) -> np.ndarray:
        """Per node: FGD's score × 1000 (+1 for keep-whole) plus a tie fraction in [0, 1)
        (higher wins), or -1 where `req` does not fit; current for the state as it is now.
        A view, valid until the next call."""
        t = self.shape(req)
        kern.best_node(t, self._st, self._mt, self._tb)
        return self.key[t]

    def decide(self, req: Request) -> Placement | None:
        """FGD's placement for `req`, or None when no node fits. Changes nothing."""
        t = self.shape(req)
        node = int(kern.best_node(t, self._st, self._mt, self._tb))
        return None if node < 0 else self._bindable(req, t, node)

    def placement(self, req: Request, node: int) -> Placement:
        """`req` on `node` with the GPUs FGD picks there; ValueError if it does not fit."""
        if self.column(req)[node] < 0:
            raise ValueError(f"request {req.id} does not fit on {self.state.names[node]}")
        return self._bindable(req, self.shape(req), node)

    def rollout(self, req: Request, node: int, future: np.ndarray) -> tuple[int, float]:
        """Place `req` on `node`, then the shapes `future` (from `shape`) in order by FGD where
        they fit; undo it all. (GPU milli the future placed, the cluster's F(M) after)."""
        if self.column(req)[node] < 0:
            raise ValueError(f"request {req.id} does not fit on {self.state.names[node]}")
        t = self.shape(req)
        volume, frag = kern.rollout(node, t, future, self._st, self._mt, self._tb)
        return int(volume), float(frag)

    def _bindable(self, req: Request, t: int, node: int) -> Placement:
        if req.kind is Kind.SHARE:
            gpus: tuple[int, ...] = (int(self.gpu[t, node]),)
        elif req.kind is Kind.GPUS:
            gpus = whole_gpus(self.state, node, req.num_gpu)
        else:
            gpus = ()
        return self.state.container_placement(req, node, gpus)
