"""FGD with Monte-Carlo rollouts near saturation: the experiment behind the product's lookahead
(lookahead.py), with its settings as options and pure FGD ties (no keep-whole).

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

from cardhour.scheduler.fgd.lookahead import distinct_best
from cardhour.scheduler.fgd.table import FgdTable
from cardhour.scheduler.frag import TypicalWorkload
from cardhour.scheduler.replay import run as replay
from cardhour.scheduler.replay.report import parse_seeds
from cardhour.scheduler.replay.trace import parse_nodes, parse_pods
from cardhour.scheduler.request import MILLI, Request
from cardhour.scheduler.state import FleetState

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces" / "openb"


def fresh_replay(trace: str, seed: int) -> tuple[FleetState, FgdTable, list[Request], int]:
    """The FGD protocol's start for one seed: the empty openb fleet, an FGD table over it (M from
    the trace, the seed's tie order), the shuffled tuned pod stream, and GPU capacity in milli."""
    nodes = parse_nodes((TRACES / "openb_node_list_gpu_node.csv").read_text())
    pods = parse_pods((TRACES / f"openb_pod_list_{trace}.csv").read_text())
    rng = np.random.default_rng(seed)
    state = FleetState.build(nodes)
    capacity = int(state.gpu_count.sum()) * MILLI
    workload = TypicalWorkload.from_requests(pods)
    rank = rng.permutation(len(state))
    stream = replay.tune_pods(pods, capacity, 1.3, rng)
    return state, FgdTable(state, workload, rank), stream, capacity


def run(
    trace: str,
    seed: int,
    candidates: int,
    horizon: int,
    start: float,
    samples: int = 1,
    from_workload: bool = False,
) -> float:
    """One seed of the FGD protocol; unallocated GPU % at 100% arrived."""
    state, table, stream, capacity = fresh_replay(trace, seed)
    futures = np.random.default_rng(seed + 1000)
    typical, p_typical = table.typical()  # columns of M's task types, their probabilities
    arrived: list[Request] = []
    shapes = np.empty(len(stream), dtype=np.int64)  # FgdTable column of each arrived pod
    so_far = 0
    at_100: list[float] = []
    for pod in stream:
        so_far += pod.gpu_total_milli
        shapes[len(arrived)] = table.shape(pod)
        arrived.append(pod)
        table.meter.refresh()
        allocated = 1 - table.meter.idle.sum() / capacity
        column = table.column(pod)
        best: list[int] = []
        if allocated >= start and so_far <= 1.01 * capacity:
            best = distinct_best(state, column, candidates)
        if len(best) < 2:
            decision = table.decide(pod)
            if decision is not None:
                state.assume(decision)
        else:
            if from_workload:
                picks = futures.choice(len(typical), size=(samples, horizon), p=p_typical)
                samples_ = [typical[row] for row in picks]
            else:
                picks = futures.integers(len(arrived), size=(samples, horizon))
                samples_ = [shapes[row] for row in picks]
            outcome = {n: _outcome(table, pod, n, samples_) for n in best}
            # The most GPU request placed, then the least fragmentation.
            winner = min(best, key=lambda n: outcome[n])
            state.assume(table.placement(pod, winner))
        if np.floor(so_far / capacity * 100 + 0.5) == 100:  # as replay.discretise rounds
            table.meter.refresh()
            at_100.append(table.meter.idle.sum() / capacity * 100)
        if so_far > 1.01 * capacity:
            break
    return float(np.mean(at_100))


def _outcome(
    table: FgdTable, pod: Request, node: int, samples: list[np.ndarray]
) -> tuple[int, float]:
    """(−GPU milli placed, F(M) after), summed over the sampled futures."""
    volume, frag = 0, 0.0
    for future in samples:
        v, f = table.rollout(pod, node, future)
        volume += v
        frag += f
    return -volume, frag


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trace", default="default", help="openb trace suffix (default: default)")
    p.add_argument("--seeds", default="42-43")
    p.add_argument("--candidates", type=int, default=3, help="nodes tried per pod (3)")
    p.add_argument("--horizon", type=int, default=60, help="future pods per rollout (60)")
    p.add_argument("--samples", type=int, default=1, help="sampled futures per candidate (1)")
    p.add_argument(
        "--from-workload",
        action="store_true",
        help="sample futures from the typical workload M (as the product does)",
    )
    p.add_argument("--start", type=float, default=0.85, help="allocated share to start at")
    args = p.parse_args(argv)
    values = []
    for seed in parse_seeds(args.seeds):
        t0 = time.perf_counter()
        values.append(
            run(
                args.trace,
                seed,
                args.candidates,
                args.horizon,
                args.start,
                args.samples,
                args.from_workload,
            )
        )
        took = time.perf_counter() - t0
        print(f"seed {seed}: {values[-1]:.2f}% unallocated at 100% arrived ({took:.0f} s)")
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    print(f"rollout K={args.candidates} L={args.horizon} start={args.start}: "
          f"mean {statistics.mean(values):.2f} ± {sd:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
