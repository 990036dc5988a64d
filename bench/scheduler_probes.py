"""The non-replay measurements of `bench/scheduler.py`: placement latency, gang placement on a
large synthetic fleet, FleetState memory, and one replay pinned to one core.

Each probe returns a plain dict (JSON-ready) that `scheduler.py` renders. Probes change nothing
outside the state they build.
"""

from __future__ import annotations

import math
import os
import time
import tracemalloc
from collections.abc import Sequence
from typing import Any

import numpy as np

from cardhour.scheduler.engine import Scheduler
from cardhour.scheduler.frag import TypicalWorkload
from cardhour.scheduler.replay.run import replay
from cardhour.scheduler.request import MILLI, Binding, Placement, Request
from cardhour.scheduler.state import FleetState, NodeInfo

PROBE = Request(id="probe", num_gpu=1, gpu_milli=1000, cpu_milli=4000, memory_mib=16384)
PROBE_SHARE = Request(id="probe-share", num_gpu=1, gpu_milli=500, cpu_milli=4000, memory_mib=16384)
GANG = Request(id="gang", nodes=128, num_gpu=8)
NODES_PER_LEAF = 32
LEAVES_PER_SPINE = 8


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def half_full(
    nodes: Sequence[NodeInfo], pods: Sequence[Request], policy: str, seed: int, share: float = 0.5
) -> tuple[FleetState, Scheduler, dict[str, Any]]:
    """The fleet after binding the shuffled trace's pods, in order, until the arrived GPU request
    reaches `share` of capacity (the replay protocol's shuffle; failed pods are dropped)."""
    rng = np.random.default_rng(seed)
    state = FleetState.build(nodes)
    capacity = int(state.gpu_count.sum()) * MILLI
    workload = TypicalWorkload.from_requests(pods)
    scheduler = Scheduler(policy, workload, seed=seed, tie_rank=rng.permutation(len(state)))
    ordered = sorted(pods, key=lambda p: p.id)
    arrived = placed = 0
    for i in rng.permutation(len(ordered)):
        if arrived >= share * capacity:
            break
        pod = ordered[int(i)]
        arrived += pod.gpu_total_milli
        placed += isinstance(scheduler.bind(state, pod), Placement)
    allocated = 100 * (1 - state.idle_milli().sum() / capacity)
    return state, scheduler, {"pods_bound": placed, "gpu_allocated_pct": float(allocated)}


def placement_latency(
    nodes: Sequence[NodeInfo],
    pods: Sequence[Request],
    policy: str,
    samples: int,
    share: float = 0.5,
    seed: int = 42,
    probe: Request = PROBE,
) -> dict[str, Any]:
    """p50/p99 seconds of `Scheduler.place` for `probe` (one whole GPU) once `share` of the
    capacity has arrived (see `half_full`).

    Between samples the decision is reserved and released (untimed), which bumps one node's
    version as a real cycle would, so cached per-node statistics are refreshed as in production.
    """
    state, scheduler, fill = half_full(nodes, pods, policy, seed, share)
    times: list[float] = []
    for i in range(samples + 5):
        started = time.perf_counter()
        decision = scheduler.place(state, probe)
        elapsed = time.perf_counter() - started
        if i >= 5:  # warm-up
            times.append(elapsed)
        if isinstance(decision, Placement):
            state.assume(decision)
            state.forget(decision)
    return {
        "policy": policy,
        "container": container(probe),
        "fill_pct": round(share * 100),
        "samples": samples,
        "p50_s": percentile(times, 50),
        "p99_s": percentile(times, 99),
        **fill,
    }


def container(probe: Request) -> str:
    """What a latency probe places, in words: "1 GPU", "0.5 GPU"."""
    return f"{probe.num_gpu * probe.gpu_milli / 1000:g} GPU"


def synthetic_fleet(count: int) -> list[NodeInfo]:
    """`count` 8-GPU nodes, 32 per IB leaf, 8 leaves per spine, one data centre."""
    return [
        NodeInfo(
            name=f"node-{i:05d}",
            cpu_milli=192_000,
            memory_mib=2_097_152,
            gpu_count=8,
            gpu_model="H100",
            ib_leaf=f"leaf-{i // NODES_PER_LEAF:04d}",
            ib_spine=f"spine-{i // (NODES_PER_LEAF * LEAVES_PER_SPINE):03d}",
            data_centre="dc-1",
        )
        for i in range(count)
    ]


def occupy(state: FleetState, busy: np.ndarray) -> None:
    """Put a one-GPU container on each node in `busy` (indices)."""
    for i in busy:
        binding = Binding(int(i), (0,), MILLI, 1000, 1024, tag=1)
        state.assume(Placement(f"busy-{i}", (binding,)))


def min_leaves(state: FleetState, n: int, spine: int | None = None) -> int | None:
    """The fewest leaves (under `spine`, or anywhere) that together hold n empty nodes; None if
    they cannot."""
    empty = state.empty() & (state.leaf >= 0)
    if spine is not None:
        empty &= state.spine == spine
    free = np.sort(np.bincount(state.leaf[empty], minlength=len(state.leaves)))[::-1]
    cum = np.cumsum(free)
    if len(cum) == 0 or cum[-1] < n:
        return None
    return int(np.searchsorted(cum, n)) + 1


def gang_placement(count: int, occupancy: str, repeats: int, seed: int = 42) -> dict[str, Any]:
    """Time `Scheduler.place` of a 128-node gang on `count` synthetic nodes.

    `occupancy`: "mixed" gives each leaf a random busy share from {0, 5, 25, 50, 90}% (so whole
    free leaves exist and the minimum is ceil(128/32) = 4); "uniform" makes 30% of nodes busy at
    random (no leaf is whole; the minimum comes from the fullest leaves).
    """
    rng = np.random.default_rng(seed)
    state = FleetState.build(synthetic_fleet(count))
    if occupancy == "mixed":
        share = rng.choice([0.0, 0.05, 0.25, 0.5, 0.9], size=len(state.leaves))[state.leaf]
    else:
        share = np.full(len(state), 0.3)
    occupy(state, np.flatnonzero(rng.random(len(state)) < share))
    scheduler = Scheduler("bestfit", seed=seed)
    times: list[float] = []
    decision = None
    for _ in range(repeats):
        started = time.perf_counter()
        decision = scheduler.place(state, GANG)
        times.append(time.perf_counter() - started)
    empty = state.empty()
    per_leaf = np.bincount(state.leaf[empty], minlength=len(state.leaves))
    whole = int((per_leaf == NODES_PER_LEAF).sum())
    return {
        "occupancy": occupancy,
        "nodes": count,
        "free_nodes": int(empty.sum()),
        "whole_free_leaves": whole,
        "placed": isinstance(decision, Placement),
        "leaves_used": len(decision.leaves) if isinstance(decision, Placement) else None,
        "spines_used": len(decision.spines) if isinstance(decision, Placement) else None,
        "min_leaves": min_leaves(state, GANG.nodes),
        "min_leaves_one_spine": min(
            (m for s in range(len(state.spines)) if (m := min_leaves(state, GANG.nodes, s))),
            default=None,
        ),
        "p50_s": percentile(times, 50),
        "max_s": max(times),
        "repeats": repeats,
    }


def fleet_memory(count: int) -> dict[str, Any]:
    """Bytes of a `count`-node, 8-GPU FleetState: numpy nbytes, and what tracemalloc sees
    retained (and at peak) across `FleetState.build` (arrays plus Python objects)."""
    nodes = synthetic_fleet(count)
    tracemalloc.start()
    state = FleetState.build(nodes)
    retained, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    nbytes = sum(v.nbytes for v in vars(state).values() if isinstance(v, np.ndarray))
    return {
        "nodes": count,
        "gpus": int(state.gpu_count.sum()),
        "nbytes": int(nbytes),
        "retained_bytes": int(retained),
        "peak_bytes": int(peak),
    }


def pin_to_one_core() -> None:
    """Process-pool initializer: run on one CPU (the lowest this process may use)."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def one_core_replay(
    nodes: Sequence[NodeInfo], pods: Sequence[Request], policy: str, seed: int
) -> dict[str, Any]:
    """One replay's wall seconds; call it in a process pinned by `pin_to_one_core`."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    result = replay(nodes, pods, policy, seed)
    return {"policy": policy, "seed": seed, "wall_seconds": result.wall_seconds, "cpus": cpus}
