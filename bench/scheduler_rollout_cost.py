"""Where a lookahead rollout's time goes: one `FgdTable.rollout` against one best-node scan,
and a decision's rollouts one by one against `kernels.lookahead.rollouts` (all in one call).

Fills the openb fleet by FGD with the shuffled default trace (seed 42) up to `--fill` of GPU
capacity, then times (a) rollouts of `--horizon` pods drawn from the typical workload M on FGD's
`--candidates` best nodes for the trace's first pod, (b) `best_node` on a column with nothing
to rescore, called in a compiled loop (no Python dispatch), i.e. the bare scan over all nodes,
and (c) per decision (new draws each round): the K rollouts by `FgdTable.rollout` against one
`kernels.lookahead.rollouts` call with its memo and lists kept between rounds, checking that
both give the same results.

    .venv/bin/python bench/scheduler_rollout_cost.py [--fill 0.7] [--candidates 10] [--horizon 75]
"""

from __future__ import annotations

import argparse
import sys
import time

import numba as nb
import numpy as np
from scheduler_rollout import fresh_replay

from cardhour.scheduler.fgd.lookahead import distinct_best
from cardhour.scheduler.fgd.table import FgdTable
from cardhour.scheduler.kernels import fgd as kern
from cardhour.scheduler.kernels import lookahead as lk
from cardhour.scheduler.kernels import lookahead_cache as cache
from cardhour.scheduler.request import Request


@nb.njit
def _scans(t, st, mt, tb, repeat):  # type: ignore[no-untyped-def]
    total = 0
    for _ in range(repeat):
        total += kern.best_node(t, st, mt, tb)
    return total


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fill", type=float, default=0.7, help="GPU share allocated first (0.7)")
    p.add_argument("--candidates", type=int, default=10)
    p.add_argument("--horizon", type=int, default=75)
    p.add_argument("--rounds", type=int, default=200, help="rollouts per candidate (200)")
    args = p.parse_args(argv)
    state, table, stream, capacity = fresh_replay("default", 42)
    arrived = 0
    for pod in stream:
        arrived += pod.gpu_total_milli
        decision = table.decide(pod)
        if decision is not None:
            state.assume(decision)
        if arrived > args.fill * capacity:
            break
    pod = stream[0]
    best = distinct_best(state, table.column(pod), args.candidates)
    types, prob = table.typical()
    draws = np.random.default_rng(1).choice(len(types), (args.rounds, args.horizon), p=prob)
    table.rollout(pod, best[0], types[draws[0]])  # compile / load the kernels first
    started = time.perf_counter()
    for row in draws:
        for node in best:
            table.rollout(pod, node, types[row])
    per_rollout = (time.perf_counter() - started) / (args.rounds * len(best))
    t = table.shape(pod)
    _scans(t, table._st, table._mt, table._tb, 1)
    repeat = 20_000
    started = time.perf_counter()
    _scans(t, table._st, table._mt, table._tb, repeat)
    per_scan = (time.perf_counter() - started) / repeat
    print(
        f"fill {args.fill:.0%}, {len(best)} candidates, horizon {args.horizon}, {len(state)} nodes"
    )
    print(
        f"rollout:   {per_rollout * 1e3:.2f} ms "
        f"({per_rollout / (args.horizon + 1) * 1e6:.1f} µs per pod)"
    )
    print(f"bare scan: {per_scan * 1e6:.1f} µs per best_node call on a fresh column")
    batched_vs_one_by_one(table, pod, best, draws, types)
    return 0


def batched_vs_one_by_one(
    table: FgdTable, pod: Request, best: list[int], draws: np.ndarray, types: np.ndarray
) -> None:
    t = table.shape(pod)
    st, mt, tb = table._st, table._mt, table._tb
    memo = cache.new_memo(table.state.gpu_free.shape[1])
    listing = cache.new_listing(len(table.state), tb[0].shape[0])
    candidates = np.array(best, dtype=np.int64)
    one, batched = [], []
    for row in draws:
        futures = types[row][None, :]
        started = time.perf_counter()
        expected = [table.rollout(pod, node, futures[0]) for node in best]
        one.append(time.perf_counter() - started)
        started = time.perf_counter()
        volumes, frags = lk.rollouts(t, candidates, futures, st, mt, tb, listing, memo)
        batched.append(time.perf_counter() - started)
        assert [v for v, _ in expected] == volumes.tolist()
        assert [f for _, f in expected] == frags.tolist()
    one, batched = sorted(one[5:]), sorted(batched[5:])  # the first rounds compile / warm up
    med = len(one) // 2
    print(
        f"one decision, {len(best)} rollouts: one by one {one[med] * 1e3:.2f} ms, batched "
        f"{batched[med] * 1e3:.2f} ms (median of {len(one)}; {one[med] / batched[med]:.1f}x), "
        "same results"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
