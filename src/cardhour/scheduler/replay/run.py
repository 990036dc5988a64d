"""Trace replay under the FGD paper's protocol (shared/docs/FGD_BENCHMARK.md §3).

- The cluster starts empty. Pods are sorted by name and shuffled with the seed; the tie order of
  nodes is a seeded permutation (the authors' random name prefixes).
- Tuning to `tune` × GPU capacity: below it, pods sampled uniformly with replacement are appended
  until the next one's per-GPU milli would pass the target (the authors' check, quirk included);
  above it, random pods are removed until the total is at most the target.
- Each pod is tried once: no queue, no retry, no deletion; a pod that does not fit is dropped.
- After every pod: arrived GPU milli (failed pods included), allocated milli, F(M), idle milli.
  Each metric is then averaged over the events whose rounded arrived % equals x (x ± 1 if none).
Hybrid mode (`bare_metal_share` > 0) interleaves whole-node bare-metal requests carrying that
share of the GPU demand and reports how many were satisfied.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from cardhour.scheduler.engine import Scheduler
from cardhour.scheduler.frag import TypicalWorkload
from cardhour.scheduler.request import MILLI, Placement, Request
from cardhour.scheduler.state import FleetState, NodeInfo

ARRIVED = (90, 95, 100, 110, 120, 130)
MAX_TUNE = 10.0  # demand at most 10× capacity: beyond, a replay only grows its stream
MAX_BARE_METAL_SHARE = 0.9
CURVE = range(0, 131)


@dataclass
class ReplayResult:
    policy: str
    seed: int
    pods: int
    failed_pods: int
    unallocated_gpu_pct: dict[str, float]
    frag_pct_of_total: dict[str, float]
    frag_rate_pct: dict[str, float]
    wall_seconds: float
    bare_metal_requested: int = 0
    bare_metal_satisfied: int = 0
    curve: dict[str, list[float]] = field(default_factory=dict)


def tune_pods(
    pods: Sequence[Request], capacity_milli: int, tune: float, rng: np.random.Generator
) -> list[Request]:
    """Shuffle (sorted by name first), then tune the total GPU request to `tune` × capacity."""
    ordered = sorted(pods, key=lambda p: p.id)
    shuffled = [ordered[i] for i in rng.permutation(len(ordered))]
    target = tune * capacity_milli
    total = sum(p.gpu_total_milli for p in shuffled)
    if total <= target:
        if not any(p.gpu_milli for p in ordered):
            return shuffled  # CPU-only pods never move the total: cloning them would not end
        i = 0
        while True:
            pick = ordered[int(rng.integers(len(ordered)))]
            if total + pick.gpu_milli > target:
                break
            shuffled.append(_clone(pick, i))
            total += pick.gpu_total_milli
            i += 1
        return shuffled
    keep = np.ones(len(shuffled), dtype=bool)
    for j in rng.permutation(len(shuffled)):
        if total <= target:
            break
        keep[j] = False
        total -= shuffled[j].gpu_total_milli
    return [p for p, k in zip(shuffled, keep, strict=True) if k]


def _clone(pod: Request, i: int) -> Request:
    return Request(
        id=f"{pod.id}-tuned-{i}",
        cpu_milli=pod.cpu_milli,
        memory_mib=pod.memory_mib,
        num_gpu=pod.num_gpu,
        gpu_milli=pod.gpu_milli,
        gpu_models=pod.gpu_models,
    )


def add_bare_metal(
    pods: list[Request], share: float, gpus_per_node: int, rng: np.random.Generator
) -> tuple[list[Request], int]:
    """Interleave whole-node requests carrying `share` of the GPU demand at random positions."""
    if share <= 0:
        return pods, 0
    demand = sum(p.gpu_total_milli for p in pods)
    count = round(share * demand / ((1 - share) * gpus_per_node * MILLI))
    bare = [Request(id=f"bare-metal-{i}", num_gpu=gpus_per_node, nodes=1) for i in range(count)]
    slots = np.sort(rng.choice(len(pods) + count, size=count, replace=False))
    mixed: list[Request] = []
    it = iter(pods)
    b = 0
    for pos in range(len(pods) + count):
        if b < count and slots[b] == pos:
            mixed.append(bare[b])
            b += 1
        else:
            mixed.append(next(it))
    return mixed, count


def discretise(ratio: np.ndarray, values: np.ndarray) -> dict[str, float]:
    """Mean of `values` per integer arrived % (x ± 1 where no event rounds to x)."""
    out: dict[str, float] = {}
    for x in CURVE:
        hit = ratio == x
        if not hit.any():
            hit = np.abs(ratio - x) <= 1
        if hit.any():
            out[str(x)] = float(values[hit].mean())
    return out


def replay(
    nodes: Sequence[NodeInfo],
    pods: Sequence[Request],
    policy: str,
    seed: int,
    tune: float = 1.3,
    bare_metal_share: float = 0.0,
    timer: Callable[[], float] = time.perf_counter,
) -> ReplayResult:
    """Run one seed of the FGD protocol with one policy."""
    if not 0 < tune <= MAX_TUNE:
        raise ValueError(f"tune must be in (0, {MAX_TUNE:g}], got {tune}")
    if not 0 <= bare_metal_share <= MAX_BARE_METAL_SHARE:
        raise ValueError(f"bare-metal share must be in [0, {MAX_BARE_METAL_SHARE}]")
    started = timer()
    rng = np.random.default_rng(seed)
    state = FleetState.build(nodes)
    capacity = int(state.gpu_count.sum()) * MILLI
    if capacity == 0:
        raise ValueError("the node list has no GPUs")
    workload = TypicalWorkload.from_requests(pods)
    tie_rank = rng.permutation(len(state))
    stream = tune_pods(pods, capacity, tune, rng)
    stream, bare_requested = add_bare_metal(stream, bare_metal_share, 8, rng)
    scheduler = Scheduler(policy, workload, seed=seed, tie_rank=tie_rank)
    ctx = scheduler.context(state)
    n = len(stream)
    arrived = np.zeros(n)
    idle = np.zeros(n)
    frag = np.zeros(n)
    so_far = 0
    failed = bare_ok = 0
    for i, pod in enumerate(stream):
        so_far += pod.gpu_total_milli if not pod.nodes else pod.num_gpu * MILLI
        decision = scheduler.bind(state, pod)
        if isinstance(decision, Placement):
            bare_ok += bool(pod.nodes)
        else:
            failed += 1
        meter = ctx.meter()
        arrived[i] = so_far
        idle[i] = meter.idle.sum()
        frag[i] = meter.frag.sum()
    ratio = np.floor(arrived / capacity * 100 + 0.5)
    unalloc = idle / capacity * 100
    frag_total = frag / capacity * 100
    frag_rate = np.divide(frag * 100, idle, out=np.zeros(n), where=idle > 0)
    curves = {
        "unallocated_gpu_pct": discretise(ratio, unalloc),
        "frag_pct_of_total": discretise(ratio, frag_total),
        "frag_rate_pct": discretise(ratio, frag_rate),
    }

    def at(name: str) -> dict[str, float]:
        return {str(x): curves[name][str(x)] for x in ARRIVED if str(x) in curves[name]}

    return ReplayResult(
        policy=policy,
        seed=seed,
        pods=n,
        failed_pods=failed,
        unallocated_gpu_pct=at("unallocated_gpu_pct"),
        frag_pct_of_total=at("frag_pct_of_total"),
        frag_rate_pct=at("frag_rate_pct"),
        wall_seconds=timer() - started,
        bare_metal_requested=bare_requested,
        bare_metal_satisfied=bare_ok,
        curve={k: [v.get(str(x), float("nan")) for x in CURVE] for k, v in curves.items()},
    )
