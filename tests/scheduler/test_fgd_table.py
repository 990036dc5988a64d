"""`FgdTable` decides exactly as the engine's `fgd` and `cardhour` policies, and its rollouts
leave the fleet as they found it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cardhour.scheduler.engine import Scheduler
from cardhour.scheduler.fgd.table import FgdTable
from cardhour.scheduler.frag import TypicalWorkload
from cardhour.scheduler.replay import run as replay
from cardhour.scheduler.replay.trace import parse_nodes, parse_pods
from cardhour.scheduler.request import MILLI, Placement, Request
from cardhour.scheduler.state import FleetState
from tests.scheduler.factories import (
    MUTABLE,
    cpu_pod,
    gpu_pod,
    make_node,
    make_state,
    share_pod,
)
from tests.scheduler.test_replay import OPENB

MODELS = ("A100", "H100", "L40")


def random_fleet(rng: np.random.Generator, n: int = 40) -> FleetState:
    nodes = []
    for i in range(n):
        gpus = int(rng.choice([0, 1, 2, 4, 8]))
        nodes.append(
            make_node(
                f"n{i}",
                gpus=gpus,
                cpu=int(rng.choice([16, 32, 64, 96])) * 1000,
                mem=int(rng.choice([64, 256])) * 1024,
                model=str(rng.choice([*MODELS, ""])),  # "": GPUs without a model name
                schedulable=bool(rng.random() > 0.05),
                dc=str(rng.choice(["dc1", "dc2"])),
            )
        )
    return make_state(*nodes)


def random_request(rng: np.random.Generator, i: int) -> Request:
    cpu = int(rng.choice([1, 2, 4, 8, 16, 24])) * 1000
    mem = int(rng.choice([0, 1024, 8192, 65536]))
    models = frozenset(rng.choice(MODELS, size=int(rng.integers(1, 3)), replace=False))
    models = models if rng.random() < 0.3 else frozenset()
    dc = None if rng.random() < 0.8 else str(rng.choice(["dc2", "elsewhere"]))
    kind = rng.random()
    if kind < 0.15:
        return Request(f"p{i}", cpu_milli=cpu, memory_mib=mem, data_centre=dc)
    milli = int(rng.choice([100, 250, 300, 470, 500, 650, 810, 900]))
    k = 1
    if kind >= 0.6:
        k, milli = int(rng.choice([1, 1, 2, 4, 8])), MILLI
    return Request(f"p{i}", cpu, mem, k, milli, gpu_models=models, data_centre=dc)


def bindings(decision: Placement | object) -> object:
    return decision.bindings if isinstance(decision, Placement) else None


@pytest.mark.parametrize("policy", ["fgd", "fgd-keep-whole"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_fleets_decide_as_the_engine(policy: str, seed: int) -> None:
    """Mixed models, model constraints, memory, unschedulable and CPU-only nodes, until full."""
    rng = np.random.default_rng(seed)
    requests = [random_request(rng, i) for i in range(400)]
    workload = TypicalWorkload.from_requests(requests)
    engine_state = random_fleet(np.random.default_rng(seed))
    table_state = random_fleet(np.random.default_rng(seed))
    rank = rng.permutation(len(engine_state))
    engine = Scheduler(policy, workload, tie_rank=rank, compiled=False)
    table = FgdTable(table_state, workload, rank, keep_whole=policy == "fgd-keep-whole")
    placed = 0
    for req in requests:
        expected = engine.bind(engine_state, req)
        got = table.decide(req)
        assert bindings(got) == bindings(expected), req
        if got is not None:
            table_state.assume(got)
            placed += 1
    assert 0 < placed < len(requests)  # the fleet filled up on the way


@pytest.mark.parametrize("policy", ["fgd", "fgd-keep-whole"])
def test_openb_default_trace_decides_as_the_engine(policy: str) -> None:
    if not OPENB.is_dir():
        pytest.skip(f"the openb traces are not at {OPENB}")
    nodes = parse_nodes((OPENB / "openb_node_list_gpu_node.csv").read_text())
    pods = parse_pods((OPENB / "openb_pod_list_default.csv").read_text())
    workload = TypicalWorkload.from_requests(pods)
    streams = []
    for _ in range(2):
        rng = np.random.default_rng(42)
        state = FleetState.build(nodes)
        rank = rng.permutation(len(state))
        stream = replay.tune_pods(pods, int(state.gpu_count.sum()) * MILLI, 1.3, rng)
        streams.append((state, rank, stream))
    (engine_state, rank, stream), (table_state, _, _) = streams
    engine = Scheduler(policy, workload, tie_rank=rank, compiled=False)
    table = FgdTable(table_state, workload, rank, keep_whole=policy == "fgd-keep-whole")
    failed = 0
    for pod in stream[:9000]:  # past saturation (~8,400 pods): failures included
        expected = engine.bind(engine_state, pod)
        got = table.decide(pod)
        assert bindings(got) == bindings(expected), pod
        if got is None:
            failed += 1
        else:
            table_state.assume(got)
    assert failed > 100


def test_rollout_places_as_fgd_and_restores_the_fleet() -> None:
    rng = np.random.default_rng(7)
    requests = [random_request(rng, i) for i in range(300)]
    workload = TypicalWorkload.from_requests(requests)
    state = random_fleet(np.random.default_rng(7))
    rank = rng.permutation(len(state))
    table = FgdTable(state, workload, rank)
    for req in requests[:80]:
        decision = table.decide(req)
        if decision is not None:
            state.assume(decision)
    # the next GPU request with at least two nodes to choose from
    i = next(
        i
        for i in range(80, 200)
        if requests[i].num_gpu and (table.column(requests[i]) >= 0).sum() > 1
    )
    pod, future = requests[i], requests[i + 1 : i + 61]
    column = table.column(pod).copy()
    node = int(np.argsort(-column)[1])  # FGD's second choice
    before = {name: getattr(state, name).copy() for name in (*MUTABLE, "version")}
    shapes = np.array([table.shape(f) for f in future], dtype=np.int64)

    volume, frag = table.rollout(pod, node, shapes)

    for name, array in before.items():
        np.testing.assert_array_equal(getattr(state, name), array, err_msg=name)
    # the same, step by step with the engine on a copy
    copy = state.copy()
    engine = Scheduler("fgd", workload, tie_rank=rank, compiled=False)
    copy.assume(table.placement(pod, node))
    expected_volume = 0
    for f in future:
        decision = engine.bind(copy, f)
        if isinstance(decision, Placement):
            expected_volume += f.gpu_total_milli
    assert volume == expected_volume > 0
    assert frag == pytest.approx(engine.context(copy).meter().total(), rel=1e-12)
    # and the caches are still right for the restored fleet
    assert np.array_equal(table.column(pod), column)
    assert bindings(table.decide(pod)) == bindings(
        Scheduler("fgd", workload, tie_rank=rank, compiled=False).place(state, pod)
    )


def test_placement_and_requests_it_cannot_take() -> None:
    state = make_state(make_node("a", gpus=2, model="A100"), make_node("b", gpus=2, model="H100"))
    workload = TypicalWorkload.from_requests([share_pod("s", 500), gpu_pod("g", 1), cpu_pod("c")])
    table = FgdTable(state, workload, np.arange(2))
    h100 = gpu_pod("h", 2, models=frozenset({"H100"}))
    assert table.decide(h100).bindings[0].node == 1  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="does not fit on a"):
        table.placement(h100, 0)
    assert table.decide(gpu_pod("big", 4)) is None
    with pytest.raises(ValueError, match="FgdTable places containers"):
        table.decide(Request("bm", num_gpu=2, nodes=1))
    with pytest.raises(ValueError, match="tie rank has 3 entries"):
        FgdTable(state, workload, np.arange(3))
    # without integer weights its sums would not be exact: the engine keeps to the plugins
    rounded = dataclasses.replace(workload, weight=None)
    with pytest.raises(ValueError, match="integer weights"):
        FgdTable(state, rounded, np.arange(2))
    assert Scheduler("fgd", rounded).table(state) is None
    assert Scheduler("fgd", workload).table(state) is not None
