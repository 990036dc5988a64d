"""Filter plugins: which nodes can take a request at all, and why the others cannot.

Container requests (cpu/share/gpus) run through `CONTAINER_FILTERS`; whole-node requests
(node/gang) through `NODE_FILTERS`. Reasons are short phrases counted into pending reasons.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from cardhour.scheduler.framework import Context, FilterPlugin
from cardhour.scheduler.request import Request


class Available:
    name = "available"

    def filter(self, ctx: Context, req: Request) -> Iterable[tuple[str, np.ndarray]]:
        s = ctx.state
        yield "unschedulable", ~s.schedulable
        yield "held whole by bare metal", s.exclusive


class DataCentre:
    """The request's data centre, and its node when it must run where its volume is."""

    name = "data-centre"

    def filter(self, ctx: Context, req: Request) -> Iterable[tuple[str, np.ndarray]]:
        s = ctx.state
        if req.data_centre is not None:
            code = s.dcs.index(req.data_centre) if req.data_centre in s.dcs else -2
            yield "other data centre", s.dc != code
        if req.node is not None:
            only = np.zeros(len(s.names), dtype=bool)
            if req.node in s.index:
                only[s.index[req.node]] = True
            yield "its data is on another host", ~only


class GpuModel:
    name = "gpu-model"

    def filter(self, ctx: Context, req: Request) -> Iterable[tuple[str, np.ndarray]]:
        if req.num_gpu == 0 and not req.nodes:
            return
        s = ctx.state
        if req.num_gpu or not req.nodes:
            yield "no GPUs", s.gpu_count == 0
        if req.gpu_models:
            allowed = np.array([m in req.gpu_models for m in s.models] + [False])
            yield "wrong GPU model", ~allowed[s.model]


class CpuMemory:
    name = "cpu-memory"

    def filter(self, ctx: Context, req: Request) -> Iterable[tuple[str, np.ndarray]]:
        s = ctx.state
        yield "insufficient CPU", s.cpu_free < req.cpu_milli
        yield "insufficient memory", s.mem_free < req.memory_mib


class GpuFit:
    """Enough GPUs with enough free milli each (a shared GPU must have room for the fraction)."""

    name = "gpu-fit"

    def filter(self, ctx: Context, req: Request) -> Iterable[tuple[str, np.ndarray]]:
        if req.num_gpu == 0:
            return
        s = ctx.state
        yield "too few GPUs per node", s.gpu_count < req.num_gpu
        fitting = (s.gpu_free >= req.gpu_milli).sum(axis=1)
        yield "insufficient GPU", fitting < req.num_gpu


class WholeNode:
    """Bare metal and gangs: an empty node of the asked size (and with InfiniBand for gangs)."""

    name = "whole-node"

    def filter(self, ctx: Context, req: Request) -> Iterable[tuple[str, np.ndarray]]:
        s = ctx.state
        if req.num_gpu:
            yield "other node size", s.gpu_count != req.num_gpu
        if req.nodes > 1:
            yield "no InfiniBand", s.leaf < 0
        yield "node in use", ~s.empty()


CONTAINER_FILTERS: tuple[FilterPlugin, ...] = (
    Available(),
    DataCentre(),
    GpuModel(),
    GpuFit(),
    CpuMemory(),
)
NODE_FILTERS: tuple[FilterPlugin, ...] = (Available(), DataCentre(), GpuModel(), WholeNode())


def run_filters(
    ctx: Context,
    req: Request,
    filters: Iterable[FilterPlugin],
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, int]]:
    """(mask of nodes passing every filter, {reason: nodes rejected first by it}). `weights`
    (each ≥ 1): node i counts as `weights[i]` nodes (one node standing for a class of alike
    nodes, as the launch's capacity summary does)."""
    alive = np.ones(len(ctx.state), dtype=bool)
    counts: dict[str, int] = {}
    for plugin in filters:
        for reason, failing in plugin.filter(ctx, req):
            hit = alive & failing
            n = int(hit.sum()) if weights is None else int(weights[hit].sum())
            if n:
                counts[reason] = counts.get(reason, 0) + n
                alive &= ~failing
    return alive, counts


def pending_reason(total: int, counts: dict[str, int], prefix: str = "") -> str:
    parts = ", ".join(f"{n} {why}" for why, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    head = f"{prefix}; " if prefix else ""
    return f"{head}0/{total} nodes fit: {parts}" if parts else f"{head}0/{total} nodes fit"
