"""The placement engine: filters → scores → a node (or a gang) → GPUs inside it.

`Scheduler.place` decides and changes nothing; `Scheduler.bind` decides and reserves the result
on the state (`FleetState.assume`), so one cycle can place many requests on one snapshot.
Containers of FGD profiles are decided by the compiled `FgdTable` (the same decisions as the
plugins, faster), with the profile's lookahead if it has one; the plugins give the pending
reason when nothing fits.
"""

from __future__ import annotations

import numpy as np

from cardhour.scheduler import scores  # noqa: F401  (registers the score plugins)
from cardhour.scheduler.fgd import lookahead  # noqa: F401  (registers the lookahead)
from cardhour.scheduler.fgd import score as fgd  # noqa: F401  (registers the score plugins)
from cardhour.scheduler.fgd.table import FgdTable
from cardhour.scheduler.filters import (
    CONTAINER_FILTERS,
    NODE_FILTERS,
    pending_reason,
    run_filters,
)
from cardhour.scheduler.frag import TypicalWorkload
from cardhour.scheduler.framework import (
    SCORE_PLUGINS,
    Context,
    Profile,
    ScorePlugin,
    profile_named,
)
from cardhour.scheduler.gang import place_gang, place_node
from cardhour.scheduler.gpusel import share_gpu, whole_gpus
from cardhour.scheduler.request import Kind, Pending, Placement, Request
from cardhour.scheduler.state import FleetState, NodeInfo


class Scheduler:
    """One policy (a profile) with its plugins, randomness and tie order.

    `tie_rank[i]` orders nodes among equal scores (lowest first); when None, node index order.
    `workload` is the typical workload M that fragmentation-aware policies need.
    `compiled=False` makes FGD profiles decide through the plugins too (the reference the
    compiled table is tested against); a lookahead profile then decides as its plain FGD.
    """

    def __init__(
        self,
        profile: Profile | str,
        workload: TypicalWorkload | None = None,
        seed: int = 0,
        tie_rank: np.ndarray | None = None,
        compiled: bool = True,
    ) -> None:
        self.profile = profile_named(profile) if isinstance(profile, str) else profile
        if self.profile.needs_workload and workload is None:
            raise ValueError(f"policy {self.profile.name} needs a typical workload")
        self.plugins: list[tuple[ScorePlugin, int]] = [
            (SCORE_PLUGINS[name](), weight) for name, weight in self.profile.scores
        ]
        self.workload = workload
        self.rng = np.random.default_rng(seed)
        self.tie_rank = tie_rank
        self._ctx: Context | None = None
        self.compiled = compiled
        self._table: FgdTable | None = None

    def context(self, state: FleetState) -> Context:
        """The plugins' view of `state` (cached per state; each caller keeps its own reference,
        so threads deciding on different states never see each other's). Deciding on one state
        from several threads at once is not supported."""
        ctx = self._ctx
        if ctx is None or ctx.state is not state:
            ctx = Context(state, self.rng, self.workload)
            self._ctx = ctx
        return ctx

    def table(self, state: FleetState) -> FgdTable | None:
        """The compiled FGD table deciding this profile's containers on `state` (cached per
        state, as `context`), or None for profiles whose scores are not FGD's."""
        keep_whole = self.profile.fgd_table_mode()
        workload = self.workload
        if keep_whole is None or workload is None or workload.weight is None or not self.compiled:
            return None
        table = self._table
        if table is None or table.state is not state:
            table = FgdTable(state, workload, self._rank(state), keep_whole)
            self._table = table
        return table

    def _rank(self, state: FleetState) -> np.ndarray:
        rank = self.tie_rank
        if rank is None or len(rank) != len(state):
            rank = np.arange(len(state))
        return rank

    def place(
        self, state: FleetState, req: Request, look_ahead: bool = True
    ) -> Placement | Pending:
        """Decide where `req` goes on `state`; changes nothing. `look_ahead=False` skips the
        profile's lookahead (its rollouts only choose among nodes where `req` fits, so whether
        it fits is the same answer, without drawing from this engine's randomness)."""
        ctx = self.context(state)
        kind = req.kind
        # the compiled table knows shapes, not nodes: a request pinned to one node (where its
        # data is) is decided by the filters and plugins
        compiled = kind in (Kind.CPU, Kind.SHARE, Kind.GPUS) and req.node is None
        table = self.table(state) if compiled else None
        if table is not None:
            how = self.profile.lookahead if look_ahead else None
            if how is None:
                decision = table.decide(req)
            else:
                node = lookahead.choose(table, req, self.rng, how)
                decision = None if node is None else table.placement(req, node)
            if decision is not None:
                return decision
        filters = NODE_FILTERS if kind in (Kind.NODE, Kind.GANG) else CONTAINER_FILTERS
        alive, counts = run_filters(ctx, req, filters)
        candidates = np.flatnonzero(alive)
        total = len(state)
        if kind is Kind.GANG:
            if len(candidates) < req.nodes:
                prefix = f"need {req.nodes} whole free nodes, {len(candidates)} free"
                return Pending(pending_reason(total, counts, prefix), counts)
            placed = place_gang(state, req, candidates, self._rank(state))
            if isinstance(placed, str):
                return Pending(pending_reason(total, counts, placed), counts)
            return placed
        if len(candidates) == 0:
            return Pending(pending_reason(total, counts), counts)
        if kind is Kind.NODE:
            return place_node(state, req, candidates, self._rank(state))
        return self._place_container(ctx, req, candidates)

    def _place_container(self, ctx: Context, req: Request, candidates: np.ndarray) -> Placement:
        total = np.zeros(len(candidates))
        hint: np.ndarray | None = None
        for i, (plugin, weight) in enumerate(self.plugins):
            scored = plugin.score(ctx, req, candidates)
            total += weight * scored.values
            if i == 0:
                hint = scored.gpus
        top = np.flatnonzero(total == total.max())
        rank = self._rank(ctx.state)
        pos = top[np.argmin(rank[candidates[top]])] if len(top) > 1 else top[0]
        node = int(candidates[pos])
        state = ctx.state
        if req.kind is Kind.SHARE:
            if self.profile.share_gpu == "plugin" and hint is not None:
                gpus: tuple[int, ...] = (int(hint[pos]),)
            else:
                gpus = (share_gpu(state, node, req.gpu_milli, self.profile.share_gpu, self.rng),)
        elif req.kind is Kind.GPUS:
            gpus = whole_gpus(state, node, req.num_gpu)
        else:
            gpus = ()
        return state.container_placement(req, node, gpus)

    def bind(self, state: FleetState, req: Request) -> Placement | Pending:
        """Place and reserve on `state`."""
        decision = self.place(state, req)
        if isinstance(decision, Placement):
            state.assume(decision)
        return decision


def warm(profile: Profile | str) -> None:
    """Compile (or load from numba's cache) what `profile` decides with, by placing a few
    containers on a small fleet of its own. Call it before deciding inside a database
    transaction: a first compile takes minutes on a cold cache (`make kernels`: 2 min 43 s on 2
    cores), and the transaction's locks would be held all that time."""
    nodes = [
        NodeInfo(f"warm-{i}", 32_000, 262_144, 8, "warm", (0, 0, 0, 0, 1, 1, 1, 1))
        for i in range(4)
    ]
    state = FleetState.build(nodes)
    shapes = [(4_000, 1, 500), (8_000, 1, 1000), (16_000, 2, 1000), (2_000, 0, 0)]
    requests = [
        Request(f"warm-{i}", cpu, 1024, gpus, milli)
        for i, (cpu, gpus, milli) in enumerate(shapes * 3)
    ]
    engine = Scheduler(profile, TypicalWorkload.from_requests(requests), seed=0)
    for req in requests:
        engine.bind(state, req)
