"""The policy variants tried while looking for a policy that beats FGD (experiments, not product).

Each variant is FGD with one change. Run one on the openb default trace:

    .venv/bin/python bench/scheduler_variants.py tie-share-best-fit --seeds 42-44
    .venv/bin/python bench/scheduler_variants.py --list

and compare with `fgd` on the same seeds. docs/benchmarks/scheduler.md ("Our policy: what we
tried") records what each reached. Reads ../shared/traces/openb (never copied into the repo).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from cardhour.scheduler import scores
from cardhour.scheduler.fgd import score as fgd
from cardhour.scheduler.frag import TypicalWorkload
from cardhour.scheduler.framework import Context, Profile, Scored, register_profile, register_score
from cardhour.scheduler.replay import run as replay
from cardhour.scheduler.replay.report import parse_seeds
from cardhour.scheduler.replay.trace import parse_nodes, parse_pods
from cardhour.scheduler.request import MILLI, Kind, Request

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces" / "openb"
Tie = Callable[[Context, Request, np.ndarray], np.ndarray]


def _quantised(scale: float) -> type:
    """FGD with floor(scale·sigmoid(Δ/1000)) instead of scale 100 (0 = un-rounded Δ)."""

    class Quantised:
        name = f"fgd-q{scale:g}"

        def score(self, ctx: Context, req: Request, nodes: np.ndarray) -> Scored:
            def q(delta: np.ndarray) -> np.ndarray:
                return delta if scale == 0 else np.floor(scale / (1 + np.exp(-delta / 1000)))

            meter = ctx.meter()
            before = meter.frag[nodes]
            if req.kind is Kind.SHARE:
                pos, gpu, old = fgd.share_candidates(ctx, req, nodes)
                after = fgd.fragment_after(meter, req, nodes[pos], old)
                values, gpus = fgd.best_per_node(pos, gpu, q(before[pos] - after), len(nodes))
                return Scored(values, gpus)
            return Scored(q(before - fgd.fragment_after(meter, req, nodes)))

    return Quantised


def _scarcity(alpha: float) -> type:
    """FGD whose task types are weighted by p_m·(1 + alpha·min(r_m, 10)) instead of p_m, where
    r_m = (expected arrivals of type m until the idle GPU is used up) / (placements of type m
    the fleet can still take, GPU- and CPU-limited): fragmenting capacity for a type that will
    run short costs more than for one with room to spare. Weights move with every decision."""

    class Scarce:
        name = f"fgd-scarcity-{alpha:g}"

        def score(self, ctx: Context, req: Request, nodes: np.ndarray) -> Scored:
            meter = ctx.meter()
            w, s = meter.w, ctx.state
            gpu_slots = np.where(w.milli > 0, meter.fit // np.maximum(w.count, 1), 1 << 30)
            cpu_slots = s.cpu_free[:, None] // np.maximum(w.cpu, 1)
            usable = meter.access | (w.milli == 0)
            supply = (np.minimum(gpu_slots, cpu_slots) * usable).sum(axis=0)
            per_pod = float((w.p * w.milli * w.count).sum())
            demand = w.p * meter.idle.sum() / per_pod
            weights = w.p * (1 + alpha * np.minimum(demand / np.maximum(supply, 1), 10))
            all_nodes = np.arange(len(s))
            before = meter.node_frag(
                meter.fit[nodes], meter.small[nodes], meter.idle[nodes], s.cpu_free[nodes],
                all_nodes[nodes], weights,
            )  # fmt: skip
            if req.kind is Kind.SHARE:
                pos, gpu, old = fgd.share_candidates(ctx, req, nodes)
                after = fgd.fragment_after(meter, req, nodes[pos], old, weights)
                # rounded: float weights must not turn an exact Δ = 0 into 49 or 50
                delta = fgd.sigmoid_score(np.round(before[pos] - after, 6))
                values, gpus = fgd.best_per_node(pos, gpu, delta, len(nodes))
                return Scored(values, gpus)
            after = fgd.fragment_after(meter, req, nodes, None, weights)
            return Scored(fgd.sigmoid_score(np.round(before - after, 6)))

    return Scarce


def _idle(ctx: Context, nodes: np.ndarray) -> np.ndarray:
    return ctx.state.gpu_free[nodes].sum(axis=1)


def _gpu_only(f: Tie) -> Tie:
    return lambda ctx, req, nodes: f(ctx, req, nodes) if req.num_gpu else np.zeros(len(nodes))


def _cpu_only(f: Tie) -> Tie:
    return lambda ctx, req, nodes: np.zeros(len(nodes)) if req.num_gpu else f(ctx, req, nodes)


def _share_best_fit(ctx: Context, req: Request, nodes: np.ndarray) -> np.ndarray:
    if req.kind is not Kind.SHARE:
        return np.zeros(len(nodes))
    free = ctx.state.gpu_free[nodes]
    return -np.where(free >= req.gpu_milli, free - req.gpu_milli, 2 * MILLI).min(axis=1) / MILLI


def _cpu_slack(ctx: Context, req: Request, nodes: np.ndarray) -> np.ndarray:
    """CPU left beyond 12 vCPU per idle GPU (the G2 nodes' ratio), after placement."""
    s = ctx.state
    idle = _idle(ctx, nodes) - req.gpu_total_milli
    return (s.cpu_free[nodes] - req.cpu_milli - 12 * idle) / 128_000


def _balance(ctx: Context, req: Request, nodes: np.ndarray) -> np.ndarray:
    """Closeness of the node's free vCPU per free GPU to 11 (the trace's GPU pods' mean)."""
    idle = (_idle(ctx, nodes) - req.gpu_total_milli) / MILLI
    cpu = (ctx.state.cpu_free[nodes] - req.cpu_milli) / 1000
    return -np.abs(np.log((cpu + 1) / (idle * 11 + 1))) / 10


def _intensity(ctx: Context, req: Request, nodes: np.ndarray) -> np.ndarray:
    """GPU pods with more vCPU per GPU than 12 (the G2 nodes' ratio) to the tied node with the
    most free vCPU per idle GPU, the others to the one with the least."""
    idle = np.maximum(_idle(ctx, nodes), 1) / MILLI
    ratio = np.log1p(ctx.state.cpu_free[nodes] / 1000 / idle) / 10
    per_gpu = req.cpu_milli / max(req.gpu_total_milli, 1)
    return ratio if per_gpu > 12 else -ratio


TIES: dict[str, Tie] = {
    "tie-intensity": _gpu_only(_intensity),
    "tie-share-best-fit": _share_best_fit,
    "tie-cpu-least-idle": _cpu_only(lambda ctx, req, nodes: -_idle(ctx, nodes) / 8000),
    "tie-cpu-slack-gpu-pods": _gpu_only(_cpu_slack),
    "tie-cpu-slack-all": _cpu_slack,
    "tie-cpu-slack-cpu-pods": _cpu_only(_cpu_slack),
    "tie-balance": _gpu_only(_balance),
}
BASELINE_TIES = {
    "tie-bestfit": ("bestfit", 1),
    "tie-worstfit": ("bestfit", -1),
    "tie-packing": ("packing", 1),
    "tie-clustering": ("clustering", 1),
    "tie-dotprod-neg": ("dotprod", -1),
    "tie-dotprod": ("dotprod", 1),
}


def register_variants() -> list[str]:
    assert scores  # the baselines' plugins are registered by importing it
    names = []
    for scale in (0, 25, 50, 200):
        plugin = _quantised(scale)
        register_score(plugin.name)(plugin)
        register_profile(Profile(plugin.name, ((plugin.name, 1000),), "plugin", True))
        names.append(plugin.name)
    for alpha in (0.5, 2.0):
        plugin = _scarcity(alpha)
        register_score(plugin.name)(plugin)
        register_profile(Profile(plugin.name, ((plugin.name, 1000),), "plugin", True))
        names.append(plugin.name)
    for name, tie in TIES.items():

        def make(tie: Tie = tie, name: str = name) -> object:
            class TieScore:
                def score(self, ctx: Context, req: Request, nodes: np.ndarray) -> Scored:
                    return Scored(tie(ctx, req, nodes))

            TieScore.name = name  # type: ignore[attr-defined]
            return TieScore()

        register_score(name)(make)  # type: ignore[arg-type]
        register_profile(Profile(name, (("fgd", 1000), (name, 1)), "plugin", True))
        names.append(name)
    for name, (plugin_name, weight) in BASELINE_TIES.items():
        register_profile(Profile(name, (("fgd", 1000), (plugin_name, weight)), "plugin", True))
        names.append(name)
    return names


def main(argv: list[str]) -> int:
    names = register_variants()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("variant", nargs="?", help="a variant name (see --list), or fgd")
    p.add_argument("--trace", default="default", help="openb trace suffix (default: default)")
    p.add_argument("--seeds", default="42-44")
    p.add_argument("--popularity", type=float, default=None, help="typical-workload cut")
    p.add_argument("--gpu-weighted", action="store_true", help="weight types by GPU request")
    p.add_argument("--list", action="store_true")
    args = p.parse_args(argv)
    if args.list or not args.variant:
        print("\n".join(["fgd", "cardhour", *names]))
        return 0
    if args.popularity is not None or args.gpu_weighted:
        build = TypicalWorkload.from_requests
        cut = args.popularity or 0.95

        class Workload:
            @staticmethod
            def from_requests(pods: list[Request]) -> TypicalWorkload:
                return build(pods, popularity=cut, gpu_weighted=args.gpu_weighted)

        replay.TypicalWorkload = Workload  # type: ignore[misc,assignment]
    nodes = parse_nodes((TRACES / "openb_node_list_gpu_node.csv").read_text())
    pods = parse_pods((TRACES / f"openb_pod_list_{args.trace}.csv").read_text())
    values = []
    for seed in parse_seeds(args.seeds):
        result = replay.replay(nodes, pods, args.variant, seed)
        values.append(result.unallocated_gpu_pct["100"])
        print(f"{args.variant} seed {seed}: {values[-1]:.2f}% unallocated at 100% arrived")
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    print(f"{args.variant} {args.trace}: mean {statistics.mean(values):.2f} ± {sd:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
