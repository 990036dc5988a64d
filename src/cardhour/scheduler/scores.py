"""The FGD paper's baseline score plugins, each following the authors' Go rules exactly.

See shared/docs/FGD_BENCHMARK.md §4. Scores are Kubernetes integers in 0..100 (higher wins).
Normalisation constants: MaxSpecCpu = 128000 milli, MaxSpecGpu = 8000 milli.
"""

from __future__ import annotations

import numpy as np

from cardhour.scheduler.framework import Context, Scored, register_score
from cardhour.scheduler.request import MILLI, Request

MAX_SPEC_CPU = 128_000
MAX_SPEC_GPU = 8_000


@register_score("random")
class RandomScore:
    """One feasible node drawn uniformly scores 100, every other 0."""

    name = "random"

    def score(self, ctx: Context, req: Request, nodes: np.ndarray) -> Scored:
        values = np.zeros(len(nodes))
        values[ctx.rng.integers(len(nodes))] = 100
        return Scored(values)


@register_score("dotprod")
class DotProdScore:
    """Tetris-like alignment: int(100·(1 − node_left·pod/2)) on [cpu/128000, gpu/8000] vectors."""

    name = "dotprod"

    def score(self, ctx: Context, req: Request, nodes: np.ndarray) -> Scored:
        s = ctx.state
        cpu_left = s.cpu_free[nodes] / MAX_SPEC_CPU
        gpu_left = s.gpu_free[nodes].sum(axis=1) / MAX_SPEC_GPU
        dot = cpu_left * (req.cpu_milli / MAX_SPEC_CPU) + gpu_left * (
            req.gpu_total_milli / MAX_SPEC_GPU
        )
        return Scored(np.floor(100 * (1 - dot / 2)))


@register_score("clustering")
class ClusteringScore:
    """Gandiva-style affinity: nodes hosting only the same kind of GPU pod first, then packed."""

    name = "clustering"

    def score(self, ctx: Context, req: Request, nodes: np.ndarray) -> Scored:
        tag = req.tag
        if tag is None:
            return Scored(np.zeros(len(nodes)))
        s = ctx.state
        packed = 25 * (MAX_SPEC_GPU - s.gpu_free[nodes].sum(axis=1)) // MAX_SPEC_GPU
        tags = s.tags[nodes]
        same = tags[:, tag] > 0
        others = tags.sum(axis=1) - tags[:, tag] > 0
        base = np.select([same & ~others, same & others, ~same & ~others], [75, 50, 25], 0)
        return Scored((base + packed).astype(np.float64))


@register_score("packing")
class PackingScore:
    """Prefer shared GPUs, then partly used nodes, then small empty nodes."""

    name = "packing"

    def score(self, ctx: Context, req: Request, nodes: np.ndarray) -> Scored:
        if req.num_gpu == 0:
            return Scored(np.zeros(len(nodes)))
        s = ctx.state
        free = s.gpu_free[nodes]
        real = s.gpu_real[nodes]
        count = s.gpu_count[nodes]
        whole = (free == MILLI) & real
        all_free = whole.sum(axis=1) == count
        # GPUs taken least-remaining first among those that fit.
        order = np.sort(np.where(free >= req.gpu_milli, free, MILLI + 1), axis=1)
        used = order[:, : req.num_gpu]
        fully_free_used = (used == MILLI).sum(axis=1)
        shared_score = np.maximum(100 - (used * 100 // MILLI).sum(axis=1) // 10, 50)
        some_free_score = np.maximum(50 - fully_free_used, 33)
        empty_score = np.maximum(33 - count, count)
        values = np.where(
            all_free, empty_score, np.where(fully_free_used > 0, some_free_score, shared_score)
        )
        return Scored(values.astype(np.float64))


@register_score("bestfit")
class BestFitScore:
    """The node with the least CPU and GPU left over, min-max normalised across candidates."""

    name = "bestfit"

    def score(self, ctx: Context, req: Request, nodes: np.ndarray) -> Scored:
        s = ctx.state
        raw = (
            0.5 * (s.cpu_free[nodes] - req.cpu_milli) / MAX_SPEC_CPU
            + 0.5 * (s.gpu_free[nodes].sum(axis=1) - req.gpu_total_milli) / MAX_SPEC_GPU
        )
        score = np.floor(100 * (1 - raw)).astype(np.int64)
        low, high = score.min(), score.max()
        if high == low:
            return Scored(np.full(len(nodes), 100.0))
        return Scored(((score - low) * 100 // (high - low)).astype(np.float64))
