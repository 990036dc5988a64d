"""The openb trace format and the FGD replay protocol (FGD_BENCHMARK.md §1 and §3)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from cardhour.scheduler.replay.run import ARRIVED, CURVE, ReplayResult, replay, tune_pods
from cardhour.scheduler.replay.trace import TraceError, parse_nodes, parse_pods
from cardhour.scheduler.request import Request

OPENB = Path("/work/shared/traces/openb")

NODES_CSV = """sn,cpu_milli,memory_mib,gpu,model
openb-node-0001,96000,393216,8,G2
openb-node-0002,96000,393216,8,G2
openb-node-0003,104000,524288,2,T4
openb-node-0004,104000,524288,2,T4
openb-node-0005,32000,131072,4,V100M16
openb-node-0006,64000,262144,0,
"""
CAPACITY = 24_000  # milli-GPU: 8 + 8 + 2 + 2 + 4 GPUs

# 40 pods, as (cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec); the extra openb columns
# (qos, phase, times) are present and must be ignored.
POD_ROWS = [
    (4000, 8192, 1, 1000, ""),
    (6000, 12288, 1, 460, ""),
    (8000, 30720, 1, 500, ""),
    (2000, 4096, 0, 0, ""),
    (12000, 16384, 1, 1000, ""),
    (4000, 15258, 1, 220, ""),
    (16000, 65536, 2, 1000, ""),
    (6000, 12288, 1, 460, ""),
    (8000, 30720, 1, 810, ""),
    (1000, 2048, 0, 0, ""),
    (4000, 8192, 1, 1000, "T4"),
    (6000, 12288, 1, 470, ""),
    (8000, 30720, 1, 500, ""),
    (2000, 4096, 0, 0, ""),
    (12000, 16384, 1, 1000, ""),
    (4000, 15258, 1, 320, "V100M16|V100M32|V100M32"),
    (6000, 12288, 1, 650, ""),
    (6000, 12288, 1, 460, ""),
    (8000, 30720, 1, 810, ""),
    (1000, 2048, 0, 0, ""),
    (4000, 8192, 1, 1000, ""),
    (6000, 12288, 1, 470, ""),
    (8000, 30720, 1, 500, ""),
    (2000, 4096, 0, 0, ""),
    (32000, 131072, 4, 1000, ""),
    (4000, 15258, 1, 220, ""),
    (6000, 12288, 1, 650, ""),
    (6000, 12288, 1, 460, ""),
    (8000, 30720, 1, 810, ""),
    (1000, 2048, 0, 0, ""),
    (4000, 8192, 1, 1000, "G2"),
    (6000, 12288, 1, 470, ""),
    (8000, 30720, 1, 500, ""),
    (2000, 4096, 0, 0, ""),
    (12000, 16384, 1, 1000, ""),
    (4000, 15258, 1, 320, ""),
    (6000, 12288, 1, 650, ""),
    (6000, 12288, 1, 460, ""),
    (8000, 30720, 1, 810, ""),
    (1000, 2048, 0, 0, ""),
]
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
)


def pods_csv(rows: list[tuple[int, int, int, int, str]]) -> str:
    return POD_HEADER + "".join(
        f"openb-pod-{i:04d},{c},{m},{n},{g},{spec},LS,Running,{i * 10},,{i * 10}\n"
        for i, (c, m, n, g, spec) in enumerate(rows)
    )


PODS_CSV = pods_csv(POD_ROWS)


def total_milli(pods: list[Request]) -> int:
    return sum(p.gpu_total_milli for p in pods)


# --- parsing ------------------------------------------------------------------------------------


def test_parse_nodes() -> None:
    nodes = parse_nodes(NODES_CSV)
    assert [n.name for n in nodes][:2] == ["openb-node-0001", "openb-node-0002"]
    assert [(n.gpu_count, n.gpu_model) for n in nodes] == [
        (8, "G2"),
        (8, "G2"),
        (2, "T4"),
        (2, "T4"),
        (4, "V100M16"),
        (0, ""),
    ]
    assert (nodes[4].cpu_milli, nodes[4].memory_mib) == (32000, 131072)


def test_parse_pods() -> None:
    pods = parse_pods(PODS_CSV)
    assert len(pods) == 40
    assert pods[1] == Request("openb-pod-0001", 6000, 12288, 1, 460)
    assert pods[10].gpu_models == frozenset({"T4"})
    assert pods[15].gpu_models == frozenset({"V100M16", "V100M32"})  # duplicates collapse
    assert Counter(p.kind.value for p in pods) == {"share": 23, "gpus": 9, "cpu": 8}


def test_parse_pods_needs_only_the_five_columns() -> None:
    pods = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,0,2,1000\n")
    assert pods == [Request("p", 1000, 0, 2, 1000)]


BAD = [
    # (which parser, text, message)
    (parse_nodes, "sn,cpu_milli,memory_mib,gpu\nn,1,1,1\n", "node file lacks columns model"),
    (
        parse_nodes,
        "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,1,T4\nm,9x,1,1,T4\n",
        "line 3: cpu_milli must be an integer, got '9x'",
    ),
    (parse_nodes, "sn,cpu_milli,memory_mib,gpu,model\n", "the node file has no nodes"),
    (
        parse_pods,
        "name,cpu_milli,num_gpu,gpu_milli\np,1,1,1\n",
        "pod file lacks columns memory_mib",
    ),
    (
        parse_pods,
        POD_HEADER + "p,1000,0,1,,,LS,Running,0,,0\n",
        "line 2: gpu_milli must be an integer, got ''",
    ),
    (
        parse_pods,
        POD_HEADER + "p,1000,0,1,500,,LS,Running,0,,0\nq,-5,0,0,0,,LS,Running,0,,0\n",
        "line 3: cpu_milli must be between 0 and 1e+12",
    ),
    (
        parse_pods,
        POD_HEADER + "p,99999999999999999999999,0,0,0,,LS,Running,0,,0\n",
        "line 2: cpu_milli must be between 0 and 1e+12",
    ),
    (
        parse_nodes,
        "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,1,T4\nn,1,1,2,T4\n",
        "node 'n' appears more than once",
    ),
    (
        parse_nodes,
        "sn,cpu_milli,memory_mib,gpu,model\nc,1,1,0,\n",
        "the node file has no GPU nodes",
    ),
    (
        parse_pods,
        POD_HEADER + "p," + "9" * 140_000 + ",0,0,0,,LS,Running,0,,0\n",
        "pod file is not valid CSV: field larger than field limit (131072)",
    ),
    (
        parse_pods,
        POD_HEADER + "p,1000,0,0,500,,LS,Running,0,,0\n",
        "line 2: request p: gpu_milli without GPUs",
    ),
    (
        parse_pods,
        POD_HEADER + "p,1000,0,2,500,,LS,Running,0,,0\n",
        "line 2: request p: only one GPU can be shared",
    ),
    (parse_pods, POD_HEADER, "the pod file has no pods"),
]


@pytest.mark.parametrize("parse, text, message", BAD)
def test_trace_errors_name_the_line(
    parse: Callable[[str], object], text: str, message: str
) -> None:
    with pytest.raises(TraceError) as raised:
        parse(text)
    assert str(raised.value) == message


# --- tuning to 130% of capacity -----------------------------------------------------------------


def test_tune_up_appends_clones_after_the_shuffled_originals() -> None:
    pods = parse_pods(PODS_CSV)
    stream = tune_pods(pods, CAPACITY, 1.3, np.random.default_rng(5))
    head, tail = stream[: len(pods)], stream[len(pods) :]
    assert sorted(p.id for p in head) == sorted(p.id for p in pods)
    assert [p.id for p in head] != [p.id for p in pods]  # shuffled
    assert tail and all("-tuned-" in p.id for p in tail)
    assert [p.id.rsplit("-", 1)[1] for p in tail] == [str(i) for i in range(len(tail))]
    shapes = {(p.cpu_milli, p.num_gpu, p.gpu_milli, p.gpu_models) for p in pods}
    assert {(p.cpu_milli, p.num_gpu, p.gpu_milli, p.gpu_models) for p in tail} <= shapes
    # The authors' stop test adds the next pod's per-GPU milli (≤ 1000), not its total, so the
    # total reaches the target within one GPU and may overshoot by a multi-GPU pod's extra GPUs.
    target = 1.3 * CAPACITY
    assert target - 1000 < total_milli(stream) <= target + 3 * 1000


def test_tune_is_deterministic_per_seed() -> None:
    pods = parse_pods(PODS_CSV)
    ids = [[p.id for p in tune_pods(pods, CAPACITY, 1.3, np.random.default_rng(s))] for s in (1, 1)]
    assert ids[0] == ids[1]


def test_tune_down_removes_pods_until_the_target() -> None:
    pods = parse_pods(PODS_CSV)
    stream = tune_pods(pods, CAPACITY, 0.3, np.random.default_rng(5))
    assert total_milli(stream) <= 0.3 * CAPACITY
    assert {p.id for p in stream} < {p.id for p in pods}
    assert not any("-tuned-" in p.id for p in stream)


def test_tune_with_only_cpu_pods_terminates() -> None:
    pods = [Request(f"c{i}", cpu_milli=1000) for i in range(5)]
    stream = tune_pods(pods, CAPACITY, 1.3, np.random.default_rng(0))
    assert sorted(p.id for p in stream) == sorted(p.id for p in pods)


# --- replay ---------------------------------------------------------------------------------------


def tiny_replay(
    policy: str, seed: int = 7, tune: float = 1.3, bare_metal_share: float = 0.0
) -> ReplayResult:
    nodes, pods = parse_nodes(NODES_CSV), parse_pods(PODS_CSV)
    return replay(nodes, pods, policy, seed, tune, bare_metal_share, timer=lambda: 0.0)


@pytest.mark.parametrize("policy", ["random", "dotprod", "clustering", "packing", "bestfit", "fgd"])
def test_replay_reports_the_arrived_points(policy: str) -> None:
    result = tiny_replay(policy)
    assert result.pods > 40 and 0 < result.failed_pods < result.pods  # 130%: some must fail
    assert all(len(curve) == len(CURVE) for curve in result.curve.values())
    unalloc = result.curve["unallocated_gpu_pct"]
    reached = {str(x): unalloc[x] for x in ARRIVED if not math.isnan(unalloc[x])}
    assert result.unallocated_gpu_pct == reached and "100" in reached
    for x, value in result.unallocated_gpu_pct.items():
        assert 0 <= result.frag_pct_of_total[x] <= value <= 100
        assert 0 <= result.frag_rate_pct[x] <= 100


def test_replay_counts_failed_pods() -> None:
    assert tiny_replay("bestfit", tune=0.5).failed_pods == 0
    # Only GPU pods, all asking for a model the fleet lacks: every pod and clone fails.
    nowhere = pods_csv([(c, m, n, g, "A10") for c, m, n, g, _ in POD_ROWS if n])
    result = replay(parse_nodes(NODES_CSV), parse_pods(nowhere), "bestfit", 7)
    assert result.failed_pods == result.pods > 34
    assert all(v == pytest.approx(100.0) for v in result.unallocated_gpu_pct.values())


def test_replay_is_deterministic_for_a_seed() -> None:
    first, second = tiny_replay("fgd", seed=11), tiny_replay("fgd", seed=11)
    np.testing.assert_equal(asdict(first), asdict(second))  # NaN == NaN in the curves


def test_replay_with_bare_metal_requests() -> None:
    # Regression: a whole-node request on a fleet without InfiniBand leaves used to crash.
    result = tiny_replay("fgd", bare_metal_share=0.5)
    # half the demand as whole 8-GPU nodes on a fleet with two such nodes: with this seed 4 are
    # requested and 1 lands (a regression guard; a policy that never places them fails here)
    assert (result.bare_metal_requested, result.bare_metal_satisfied) == (4, 1)


# --- the real default trace (slow: a few seconds per policy) ------------------------------------


@pytest.mark.parametrize("policy, expected", [("fgd", 4.77), ("bestfit", 7.14)])
def test_openb_default_trace_matches_the_paper(policy: str, expected: float) -> None:
    if not OPENB.is_dir():
        pytest.skip(f"the openb traces are not at {OPENB}")
    nodes = parse_nodes((OPENB / "openb_node_list_gpu_node.csv").read_text())
    pods = parse_pods((OPENB / "openb_pod_list_default.csv").read_text())
    result = replay(nodes, pods, policy, 42)
    assert result.unallocated_gpu_pct["100"] == pytest.approx(expected, abs=0.5)
