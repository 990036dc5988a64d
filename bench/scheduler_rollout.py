"""FGD with Monte-Carlo rollouts near saturation: an experiment on the openb traces, not the
product's policy (it is 100-400 times slower than FGD).

Below `--start` (the share of GPU capacity allocated) and for the whole-node/gang kinds every
pod is placed by FGD. From `--start` until the arrived GPU request passes 101% of capacity, a
container's `--candidates` best nodes by FGD score (distinct node states, FGD's tie order) are
each tried: the pod is bound there, then `--horizon` future pods, sampled with replacement from
the pods that have arrived so far (the same sample for every candidate), are placed by FGD;
the candidate under which those pods place the most GPU request (then the least fragmentation
F(M)) wins. Everything is undone between candidates. No pod that has not arrived is looked at.

    .venv/bin/python bench/scheduler_rollout.py --seeds 42-43 --candidates 3 --horizon 60

docs/benchmarks/scheduler.md ("Our policy: what we tried") has what it reached.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from cardhour.scheduler import replay
from cardhour.scheduler.engine import Scheduler
from cardhour.scheduler.filters import CONTAINER_FILTERS, run_filters
from cardhour.scheduler.frag import TypicalWorkload
from cardhour.scheduler.report import parse_seeds
from cardhour.scheduler.request import MILLI, Kind, Placement, Request
from cardhour.scheduler.state import FleetState
from cardhour.scheduler.trace import parse_nodes, parse_pods

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces" / "openb"
CONTAINERS = (Kind.SHARE, Kind.GPUS, Kind.CPU)


def _distinct_best(
    state: FleetState, nodes: np.ndarray, values: np.ndarray, rank: np.ndarray, k: int
) -> list[int]:
    """The `k` best nodes by score (ties by `rank`), one per distinct node state."""
    chosen: list[int] = []
    seen: set[tuple[object, ...]] = set()
    for j in np.lexsort((rank[nodes], -values)):
        n = int(nodes[j])
        key = (state.model[n], state.gpu_count[n], int(state.cpu_free[n]) // 1000,
               tuple(sorted(state.gpu_free[n])))  # fmt: skip
        if key not in seen:
            seen.add(key)
            chosen.append(n)
            if len(chosen) == k:
                break
    return chosen


def run(trace: str, seed: int, candidates: int, horizon: int, start: float) -> float:
    """One seed of the FGD protocol; unallocated GPU % at 100% arrived."""
    nodes = parse_nodes((TRACES / "openb_node_list_gpu_node.csv").read_text())
    pods = parse_pods((TRACES / f"openb_pod_list_{trace}.csv").read_text())
    rng = np.random.default_rng(seed)
    state = FleetState.build(nodes)
    capacity = int(state.gpu_count.sum()) * MILLI
    workload = TypicalWorkload.from_requests(pods)
    rank = rng.permutation(len(state))
    stream = replay.tune_pods(pods, capacity, 1.3, rng)
    sched = Scheduler("fgd", workload, seed=seed, tie_rank=rank)
    ctx = sched.context(state)
    fgd_score = sched.plugins[0][0]
    futures = np.random.default_rng(seed + 1000)
    arrived: list[Request] = []
    so_far = 0
    at_100: list[float] = []
    for pod in stream:
        so_far += pod.gpu_total_milli
        arrived.append(pod)
        allocated = 1 - ctx.meter().idle.sum() / capacity
        best: list[int] = []
        if pod.kind in CONTAINERS and allocated >= start and so_far <= 1.01 * capacity:
            alive, _ = run_filters(ctx, pod, CONTAINER_FILTERS)
            fits = np.flatnonzero(alive)
            if len(fits):
                values = fgd_score.score(ctx, pod, fits).values
                best = _distinct_best(state, fits, values, rank, candidates)
        if len(best) < 2:
            sched.bind(state, pod)
        else:
            future = [arrived[i] for i in futures.integers(len(arrived), size=horizon)]
            outcome = {n: _rollout(sched, state, pod, n, future) for n in best}
            winner = min(best, key=lambda n: outcome[n])
            state.assume(sched._place_container(ctx, pod, np.array([winner])))
        if np.floor(so_far / capacity * 100 + 0.5) == 100:  # as replay.discretise rounds
            at_100.append(ctx.meter().idle.sum() / capacity * 100)
        if so_far > 1.01 * capacity:
            break
    return float(np.mean(at_100))


def _rollout(
    sched: Scheduler, state: FleetState, pod: Request, node: int, future: list[Request]
) -> tuple[int, float]:
    """(−GPU request placed, F(M) after) when `pod` goes to `node` and FGD places `future`."""
    ctx = sched.context(state)
    placed = [sched._place_container(ctx, pod, np.array([node]))]
    state.assume(placed[0])
    volume = 0
    for f in future:
        decision = sched.place(state, f)
        if isinstance(decision, Placement):
            state.assume(decision)
            placed.append(decision)
            volume += f.gpu_total_milli
    frag = float(ctx.meter().frag.sum())
    for p in reversed(placed):
        state.forget(p)
    return -volume, frag


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trace", default="default", help="openb trace suffix (default: default)")
    p.add_argument("--seeds", default="42-43")
    p.add_argument("--candidates", type=int, default=3, help="nodes tried per pod (3)")
    p.add_argument("--horizon", type=int, default=60, help="future pods per rollout (60)")
    p.add_argument("--start", type=float, default=0.85, help="allocated share to start at")
    args = p.parse_args(argv)
    values = []
    for seed in parse_seeds(args.seeds):
        t0 = time.perf_counter()
        values.append(run(args.trace, seed, args.candidates, args.horizon, args.start))
        took = time.perf_counter() - t0
        print(f"seed {seed}: {values[-1]:.2f}% unallocated at 100% arrived ({took:.0f} s)")
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    print(f"rollout K={args.candidates} L={args.horizon} start={args.start}: "
          f"mean {statistics.mean(values):.2f} ± {sd:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
