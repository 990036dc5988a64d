"""Where a policy's unallocated GPU comes from at 100% arrived, one seed of the FGD protocol on
an openb trace (an analysis for docs/benchmarks/scheduler.md, not a benchmark):

- the pods that failed by then, by shape (with nothing departing, their GPU request is the
  unallocated GPU at 100% arrived), and the first failure;
- the idle GPU then, by place: 190-milli slivers (next to 810 shares), partial and whole GPUs
  by the node's free vCPU;
- per GPU model: idle GPU, free vCPU, and the vCPU of the pods placed there by kind.

    .venv/bin/python bench/scheduler_anatomy.py --policy fgd --seed 42
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from scheduler_variants import register_variants

from cardhour.scheduler.engine import Scheduler
from cardhour.scheduler.frag import TypicalWorkload
from cardhour.scheduler.replay import run as replay
from cardhour.scheduler.replay.trace import parse_nodes, parse_pods
from cardhour.scheduler.request import MILLI, Placement, Request
from cardhour.scheduler.state import FleetState

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces" / "openb"


def shape(pod: Request) -> str:
    if pod.num_gpu == 0:
        return "cpu"
    return f"share{pod.gpu_milli}" if pod.gpu_milli < MILLI else f"{pod.num_gpu}gpu"


def kind(pod: Request) -> str:
    return "cpu" if pod.num_gpu == 0 else "share" if pod.gpu_milli < MILLI else "whole"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--policy", default="fgd", help="a policy or a scheduler_variants.py variant")
    p.add_argument("--trace", default="default")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args(argv)
    register_variants()
    nodes = parse_nodes((TRACES / "openb_node_list_gpu_node.csv").read_text())
    pods = parse_pods((TRACES / f"openb_pod_list_{args.trace}.csv").read_text())
    rng = np.random.default_rng(args.seed)
    state = FleetState.build(nodes)
    capacity = int(state.gpu_count.sum()) * MILLI
    rank = rng.permutation(len(state))
    stream = replay.tune_pods(pods, capacity, 1.3, rng)
    sched = Scheduler(args.policy, TypicalWorkload.from_requests(pods), args.seed, rank)
    failed: Counter[str] = Counter()
    failed_milli: Counter[str] = Counter()
    cpu_by: dict[str, Counter[str]] = defaultdict(Counter)
    first = None
    so_far = 0
    for i, pod in enumerate(stream):
        so_far += pod.gpu_total_milli
        if so_far > capacity:
            break
        decision = sched.bind(state, pod)
        if isinstance(decision, Placement):
            model = state.models[state.model[decision.nodes[0]]]
            cpu_by[model][kind(pod)] += pod.cpu_milli
        else:
            failed[shape(pod)] += 1
            failed_milli[shape(pod)] += pod.gpu_total_milli
            first = first or (i, so_far / capacity * 100, shape(pod))
    total = sum(failed_milli.values())
    print(f"{args.policy} seed {args.seed}: first failure {first}")
    print(f"failed by 100% arrived: {total / MILLI:.1f} GPUs ({total / capacity * 100:.2f}%)")
    for name, milli in failed_milli.most_common():
        print(f"  {name:10s} {failed[name]:5d} pods {milli / MILLI:7.1f} GPUs")
    free = state.gpu_free * state.gpu_real
    places: Counter[str] = Counter()
    for n in range(len(state)):
        cpu = state.cpu_free[n]
        band = "cpu<4" if cpu < 4000 else "cpu<8" if cpu < 8000 else "cpu ok"
        for milli in free[n][free[n] > 0]:
            where = "190 sliver" if milli == 190 else ("whole" if milli == MILLI else "part")
            places[where if where == "190 sliver" else f"{where}, {band}"] += int(milli)
    print(f"idle GPU: {free.sum() / MILLI:.1f}")
    for where, milli in sorted(places.items()):
        print(f"  {where:16s} {milli / MILLI:7.1f}")
    for m, model in enumerate(state.models):
        on = state.model == m
        used = ", ".join(f"{k} {v / 1000:.0f}" for k, v in sorted(cpu_by[model].items()))
        print(f"{model:8s} idle GPU {free[on].sum() / MILLI:6.1f}  free vCPU "
              f"{state.cpu_free[on].sum() / 1000:6.0f}  vCPU placed: {used}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
