"""FGD: place where fragmentation grows least (Weng et al., USENIX ATC 2023; fgd_score.go).

score = int(100 · sigmoid(Δ/1000)) with Δ = F_n(M) before − F_n(M) after, in milli-GPU.
- GPU-sharing request: every GPU with room is tried; the node keeps its best GPU, a later GPU
  replacing an earlier one only on a strictly higher integer score (ties → lowest index).
- Whole GPUs: "after" takes the k fully free GPUs; CPU-only: only CPU changes.

`fragment_after` is the vectorised core shared with our own policy: for candidate (node, GPU)
pairs it computes F_n(M) after placing the request, from the meter's sufficient statistics,
without copying any node.
"""

from __future__ import annotations

import numpy as np

from cardhour.scheduler.frag import FragMeter
from cardhour.scheduler.framework import Context, Scored, register_score
from cardhour.scheduler.request import MILLI, Kind, Request


def share_candidates(ctx: Context, req: Request, nodes: np.ndarray) -> tuple[np.ndarray, ...]:
    """(pair_node_pos, pair_gpu, pair_free) for GPUs with room; one GPU per distinct free value
    per node, the lowest index (equal GPUs give equal scores)."""
    free = ctx.state.gpu_free[nodes]
    pos, gpu = np.nonzero(free >= req.gpu_milli)  # row-major: by node, then GPU index
    values = free[pos, gpu]
    _, first = np.unique(pos * (MILLI + 1) + values, return_index=True)
    first.sort()
    return pos[first], gpu[first], values[first]


def fragment_after(
    meter: FragMeter,
    req: Request,
    nodes: np.ndarray,
    old: np.ndarray | None = None,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """F_n(M) after placing `req` on each of `nodes`. For a GPU-sharing request `old` gives the
    chosen GPU's free milli before the placement (one entry per row of `nodes`); `weights` as
    in `FragMeter.node_frag`."""
    w = meter.w
    fit = meter.fit[nodes]
    small = meter.small[nodes]
    idle = meter.idle[nodes] - req.gpu_total_milli
    cpu = meter.state.cpu_free[nodes] - req.cpu_milli
    d = w.milli[None, :]
    kind = req.kind
    if kind is Kind.SHARE:
        assert old is not None
        r0 = old[:, None]
        r1 = r0 - req.gpu_milli
        fit = fit - (r0 >= d) + (r1 >= d)
        small = small - np.where(r0 < d, r0, 0) + np.where(r1 < d, r1, 0)
    elif kind is Kind.GPUS:
        fit = fit - req.num_gpu * (d <= MILLI)
    return meter.node_frag(fit, small, idle, cpu, nodes, weights)


def sigmoid_score(delta: np.ndarray) -> np.ndarray:
    """FGD's integer score: floor(100·sigmoid(Δ/1000))."""
    return np.floor(100.0 / (1.0 + np.exp(-delta / 1000.0)))


def best_per_node(
    pos: np.ndarray, gpu: np.ndarray, score: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate position: the highest score and its GPU (ties → lowest GPU index)."""
    order = np.lexsort((gpu, -score, pos))
    pos_sorted = pos[order]
    keep = np.ones(len(order), dtype=bool)
    keep[1:] = pos_sorted[1:] != pos_sorted[:-1]
    chosen = order[keep]
    values = np.full(n, -np.inf)
    gpus = np.full(n, -1, dtype=np.int64)
    values[pos[chosen]] = score[chosen]
    gpus[pos[chosen]] = gpu[chosen]
    return values, gpus


@register_score("fgd")
class FgdScore:
    name = "fgd"

    def score(self, ctx: Context, req: Request, nodes: np.ndarray) -> Scored:
        meter = ctx.meter()
        before = meter.frag[nodes]
        if req.kind is Kind.SHARE:
            pos, gpu, old = share_candidates(ctx, req, nodes)
            after = fragment_after(meter, req, nodes[pos], old)
            values, gpus = best_per_node(pos, gpu, sigmoid_score(before[pos] - after), len(nodes))
            return Scored(values, gpus)
        after = fragment_after(meter, req, nodes)
        return Scored(sigmoid_score(before - after))
