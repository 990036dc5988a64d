"""Table tests for the placement engine: nodes + requests → expected placement or pending reason."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field

import numpy as np
import pytest

from cardhour.scheduler.engine import Scheduler
from cardhour.scheduler.frag import TypicalWorkload
from cardhour.scheduler.request import Binding, Pending, Placement, Request
from cardhour.scheduler.state import FleetState, NodeInfo
from tests.scheduler.factories import (
    assert_unchanged,
    cpu_pod,
    gpu_pod,
    make_node,
    make_state,
    set_free,
    share_pod,
    snapshot,
)

H100 = frozenset({"H100"})


def bare_on(rid: str, node: str) -> Request:
    return Request(rid, num_gpu=8, nodes=1, node=node)


def bare(rid: str, gpus: int = 8, models: frozenset[str] = frozenset()) -> Request:
    return Request(rid, num_gpu=gpus, nodes=1, gpu_models=models)


def gang(rid: str, n: int, gpus: int = 0, dc: str | None = None) -> Request:
    return Request(rid, num_gpu=gpus, nodes=n, data_centre=dc)


@dataclass
class Case:
    name: str
    nodes: list[NodeInfo]
    requests: list[Request]
    # Per request: {node name: GPUs} for a placement, or a substring of the pending reason.
    expect: list[dict[str, tuple[int, ...]] | str]
    used: dict[int, list[int]] = field(default_factory=dict)  # node → GPUs free (set_free)
    policy: str = "bestfit"


def run(case: Case) -> FleetState:
    state = make_state(*case.nodes)
    for node, free in case.used.items():
        set_free(state, node, free)
    scheduler = Scheduler(case.policy)
    for req, want in zip(case.requests, case.expect, strict=True):
        before = snapshot(state)
        decision = scheduler.bind(state, req)
        if isinstance(want, str):
            assert isinstance(decision, Pending), (req.id, decision)
            assert want in decision.reason, decision.reason
            assert_unchanged(state, before)
        else:
            assert isinstance(decision, Placement), (req.id, decision)
            got = {state.names[b.node]: b.gpus for b in decision.bindings}
            assert got == want, req.id
    return state


CASES = [
    # --- GPU shares ------------------------------------------------------------------------------
    Case(
        "a share takes the fitting GPU with the least room",
        [make_node("n", gpus=4)],
        [share_pod("s", 500)],
        [{"n": (1,)}],
        used={0: [1000, 600, 400, 800]},
    ),
    Case(
        "two half GPUs share one GPU",
        [make_node("n", gpus=2)],
        [share_pod("s1", 500), share_pod("s2", 500), share_pod("s3", 500)],
        [{"n": (0,)}, {"n": (0,)}, {"n": (1,)}],
    ),
    Case(
        "bestfit sends a share to the node with the least left",
        [make_node("a"), make_node("b")],
        [share_pod("s", 500)],
        [{"b": (7,)}],
        used={1: [1000] * 7 + [600]},
    ),
    Case(
        "a share never lands on a GPU without room",
        [make_node("n", gpus=2)],
        [share_pod("s", 700)],
        ["0/1 nodes fit: 1 insufficient GPU"],
        used={0: [600, 300]},
    ),
    # --- whole GPUs inside one NVLink/PCIe domain ------------------------------------------------
    Case(
        "4 GPUs stay inside the intact domain",
        [make_node("n", domains=(0, 0, 0, 0, 1, 1, 1, 1))],
        [gpu_pod("g", 4)],
        [{"n": (4, 5, 6, 7)}],
        used={0: [0] + [1000] * 7},
    ),
    Case(
        "2 GPUs go to the smaller domain that holds them",
        [make_node("n", domains=(0, 0, 0, 0, 1, 1, 1, 1))],
        [gpu_pod("g", 2), gpu_pod("h", 4)],
        [{"n": (1, 2)}, {"n": (4, 5, 6, 7)}],
        used={0: [0] + [1000] * 7},
    ),
    Case(
        "no domain holds 4: the fewest domains, largest first",
        [make_node("n", domains=(0, 0, 0, 0, 1, 1, 1, 1))],
        [gpu_pod("g", 4)],
        [{"n": (1, 2, 3, 5)}],
        used={0: [0, 1000, 1000, 1000, 0, 1000, 1000, 1000]},
    ),
    Case(
        "one domain: the first free GPUs by index",
        [make_node("n", gpus=4)],
        [gpu_pod("g", 2)],
        [{"n": (1, 3)}],
        used={0: [500, 1000, 0, 1000]},
    ),
    # --- one whole bare-metal node ---------------------------------------------------------------
    Case(
        "bare metal only on an empty node of its size, then held whole",
        [make_node("used"), make_node("free"), make_node("small", gpus=4)],
        [bare("bm"), share_pod("s", 500), gpu_pod("g", 8), cpu_pod("c"), bare("bm2")],
        [
            {"free": tuple(range(8))},
            {"small": (0,)},  # bestfit: the least left among the nodes not held whole
            "0/3 nodes fit: 1 held whole by bare metal, 1 too few GPUs per node, "
            "1 insufficient GPU",
            {"small": ()},
            "0/3 nodes fit: 1 held whole by bare metal, 1 other node size, 1 node in use",
        ],
        used={0: [500] + [1000] * 7},
    ),
    Case(
        "bare metal of any size prefers a node without InfiniBand, then the sparest leaf",
        [
            make_node("ib1", leaf="L1"),
            make_node("ib2", leaf="L1"),
            make_node("ib3", leaf="L2"),
            make_node("plain"),
        ],
        [bare("b1", gpus=0), bare("b2", gpus=0), bare("b3", gpus=0), bare("b4", gpus=0)],
        [
            {"plain": tuple(range(8))},
            {"ib3": tuple(range(8))},
            {"ib1": tuple(range(8))},
            {"ib2": tuple(range(8))},
        ],
    ),
    # --- constraints -----------------------------------------------------------------------------
    Case(
        "the GPU model constraint beats the score",
        [make_node("a100", model="A100"), make_node("h100", model="H100")],
        [share_pod("s", 300, models=H100), gpu_pod("g", 2, models=frozenset({"H100", "V100"}))],
        [{"h100": (0,)}, {"h100": (1, 2)}],
        used={0: [1000] * 7 + [400]},  # bestfit alone would pick the A100 node
    ),
    Case(
        "the GPU model constraint holds for bare metal",
        [make_node("a100", model="A100"), make_node("h100", model="H100")],
        [bare("b", gpus=0, models=H100), bare("c", gpus=0, models=H100)],
        [{"h100": tuple(range(8))}, "1 wrong GPU model"],
    ),
    Case(
        "the data centre constraint",
        [make_node("a", dc="east"), make_node("b", dc="west")],
        [
            Request("s", cpu_milli=1000, num_gpu=1, gpu_milli=300, data_centre="west"),
            Request("g", cpu_milli=1000, num_gpu=1, gpu_milli=1000, data_centre="mars"),
        ],
        [{"b": (0,)}, "0/2 nodes fit: 2 other data centre"],
        used={0: [1000] * 7 + [400]},
    ),
    Case(
        "the node constraint (where a request's volume is)",
        [make_node("a"), make_node("b"), make_node("c")],
        [
            Request("v", cpu_milli=1000, num_gpu=2, gpu_milli=1000, node="c"),
            Request("w", cpu_milli=1000, num_gpu=8, gpu_milli=1000, node="c"),
            Request("x", cpu_milli=1000, num_gpu=1, gpu_milli=1000, node="gone"),
            bare_on("y", "b"),
        ],
        [
            {"c": (0, 1)},
            "0/3 nodes fit: 2 its data is on another host, 1 insufficient GPU",
            "0/3 nodes fit: 3 its data is on another host",
            {"b": tuple(range(8))},
        ],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_placement(case: Case) -> None:
    run(case)


def test_bare_metal_is_exclusive_until_forgotten() -> None:
    state = make_state(make_node("only"))
    scheduler = Scheduler("bestfit")
    held = scheduler.bind(state, bare("bm"))
    assert isinstance(held, Placement) and held.bindings[0].exclusive
    assert state.exclusive.tolist() == [True]
    assert isinstance(scheduler.bind(state, cpu_pod("c")), Pending)
    state.forget(held)
    assert state.exclusive.tolist() == [False]
    assert isinstance(scheduler.bind(state, cpu_pod("c")), Placement)


# --- gangs: n whole nodes under the fewest IB leaves, then spines --------------------------------


def leaves(*sizes: tuple[str, str, int], dc: str = "dc1") -> list[NodeInfo]:
    """Nodes per (leaf, spine, count)."""
    return [
        make_node(f"{dc}-{leaf}-{i}", leaf=leaf, spine=spine, dc=dc)
        for leaf, spine, count in sizes
        for i in range(count)
    ]


ONE_SPINE = leaves(("L1", "S1", 3), ("L2", "S1", 5), ("L3", "S1", 2))
TWO_SPINES = leaves(("L1", "S1", 3), ("L2", "S1", 2), ("L3", "S2", 4))

GANGS = [
    # (name, fleet, gang size, expected leaves, expected spines)
    ("one leaf holds it: the 5-leaf", ONE_SPINE, 4, ("L2",), ("S1",)),
    ("one leaf, best fit: the 2-leaf", ONE_SPINE, 2, ("L3",), ("S1",)),
    ("one leaf, best fit: the 3-leaf", ONE_SPINE, 3, ("L1",), ("S1",)),
    ("largest leaf, then the best-fit last leaf", ONE_SPINE, 7, ("L2", "L3"), ("S1",)),
    ("every leaf", ONE_SPINE, 10, ("L1", "L2", "L3"), ("S1",)),
    ("one leaf beats two leaves of a bigger spine", TWO_SPINES, 4, ("L3",), ("S2",)),
    ("inside one spine when a spine holds it", TWO_SPINES, 5, ("L1", "L2"), ("S1",)),
    ("across spines only when no spine holds it", TWO_SPINES, 6, ("L2", "L3"), ("S1", "S2")),
    ("the whole fleet", TWO_SPINES, 9, ("L1", "L2", "L3"), ("S1", "S2")),
]


@pytest.mark.parametrize(
    "nodes, n, want_leaves, want_spines", [g[1:] for g in GANGS], ids=[g[0] for g in GANGS]
)
def test_gang_uses_the_fewest_leaves(
    nodes: list[NodeInfo], n: int, want_leaves: tuple[str, ...], want_spines: tuple[str, ...]
) -> None:
    state = make_state(*nodes)
    placed = Scheduler("bestfit").bind(state, gang("g", n))
    assert isinstance(placed, Placement)
    assert (placed.leaves, placed.spines) == (want_leaves, want_spines)
    assert len(placed.bindings) == n == len(set(placed.nodes))
    assert all(b.exclusive and b.gpus == tuple(range(8)) for b in placed.bindings)
    assert {state.leaves[state.leaf[i]] for i in placed.nodes} == set(want_leaves)
    assert state.exclusive.sum() == n


def test_gangs_in_sequence_fill_the_leaves_left_best() -> None:
    state = make_state(*ONE_SPINE)
    scheduler = Scheduler("bestfit")
    first = scheduler.bind(state, gang("a", 4))
    second = scheduler.bind(state, gang("b", 4))  # left: L1 3, L2 1, L3 2 → L1 + the 1 in L2
    assert isinstance(first, Placement) and isinstance(second, Placement)
    assert first.leaves == ("L2",) and second.leaves == ("L1", "L2")
    third = scheduler.bind(state, gang("c", 3))
    assert isinstance(third, Pending)
    assert third.reason.startswith("need 3 whole free nodes, 2 free; 0/10 nodes fit: 8 held whole")


GANG_PENDING = [
    # (name, fleet, GPUs free per node index, request, reason)
    (
        "too few free nodes",
        ONE_SPINE,
        {0: [0] * 8, 3: [500] * 8, 8: [999] + [1000] * 7},
        gang("g", 8),
        "need 8 whole free nodes, 7 free; 0/10 nodes fit: 3 node in use",
    ),
    (
        "nodes without InfiniBand do not count",
        [*leaves(("L1", "S1", 2)), make_node("plain1"), make_node("plain2")],
        {},
        gang("g", 3),
        "need 3 whole free nodes, 2 free; 0/4 nodes fit: 2 no InfiniBand",
    ),
    (
        "a gang stays in one data centre",
        leaves(("L1", "S1", 2), dc="east") + leaves(("L2", "S2", 2), dc="west"),
        {},
        gang("g", 3),
        "need 3 whole free nodes with InfiniBand in one data centre, at most 2 free; 0/4 nodes fit",
    ),
    (
        "node size",
        [*leaves(("L1", "S1", 2)), make_node("four", gpus=4, leaf="L1")],
        {},
        gang("g", 3, gpus=8),
        "need 3 whole free nodes, 2 free; 0/3 nodes fit: 1 other node size",
    ),
]


@pytest.mark.parametrize(
    "nodes, used, req, reason", [g[1:] for g in GANG_PENDING], ids=[g[0] for g in GANG_PENDING]
)
def test_gang_is_all_or_nothing(
    nodes: list[NodeInfo], used: dict[int, list[int]], req: Request, reason: str
) -> None:
    state = make_state(*nodes)
    for node, free in used.items():
        set_free(state, node, free)
    before = snapshot(state)
    decision = Scheduler("bestfit").bind(state, req)
    assert isinstance(decision, Pending)
    assert decision.reason == reason
    assert_unchanged(state, before)


def test_gang_in_a_named_data_centre() -> None:
    state = make_state(*leaves(("L1", "S1", 3), dc="east"), *leaves(("L2", "S2", 2), dc="west"))
    placed = Scheduler("bestfit").bind(state, gang("g", 2, dc="west"))
    assert isinstance(placed, Placement) and placed.leaves == ("L2",)


# --- pending reasons: "0/N nodes fit: <count> <reason>, ..." -------------------------------------

PENDING = [
    (
        "insufficient GPU and wrong model",
        [make_node("h1", 1, model="H100"), make_node("h2", 1, model="H100"), make_node("a", 1)],
        {0: [0], 1: [200]},
        share_pod("s", 500, models=H100),
        "0/3 nodes fit: 2 insufficient GPU, 1 wrong GPU model",
        {"insufficient GPU": 2, "wrong GPU model": 1},
    ),
    (
        "equal counts keep the filter order",
        [make_node("cpu", 0), make_node("two", 2)],
        {},
        gpu_pod("g", 4),
        "0/2 nodes fit: 1 no GPUs, 1 too few GPUs per node",
        {"no GPUs": 1, "too few GPUs per node": 1},
    ),
    (
        "CPU and memory",
        [make_node("a", cpu=8000), make_node("b", cpu=8000), make_node("c", mem=1024)],
        {},
        Request("c", cpu_milli=16_000, memory_mib=2048),
        "0/3 nodes fit: 2 insufficient CPU, 1 insufficient memory",
        {"insufficient CPU": 2, "insufficient memory": 1},
    ),
    (
        "a node is counted under its first reason only",
        [make_node("off", schedulable=False, model="T4"), make_node("t4", model="T4")],
        {},
        gpu_pod("g", 1, cpu=500_000, models=H100),
        "0/2 nodes fit: 1 unschedulable, 1 wrong GPU model",
        {"unschedulable": 1, "wrong GPU model": 1},
    ),
]


@pytest.mark.parametrize(
    "nodes, used, req, reason, counts", [p[1:] for p in PENDING], ids=[p[0] for p in PENDING]
)
def test_pending_reason(
    nodes: list[NodeInfo],
    used: dict[int, list[int]],
    req: Request,
    reason: str,
    counts: dict[str, int],
) -> None:
    state = make_state(*nodes)
    for node, free in used.items():
        set_free(state, node, free)
    decision = Scheduler("bestfit").place(state, req)
    assert isinstance(decision, Pending)
    assert (decision.reason, decision.counts) == (reason, counts)


# --- assume / forget ----------------------------------------------------------------------------


def two_nodes() -> FleetState:
    return make_state(make_node("a", gpus=2, cpu=4000), make_node("b", gpus=2, cpu=4000))


STALE = [
    ("the GPU filled up", Binding(0, (0,), 600, 0, 0), "GPUs [0] lack 600 milli"),
    ("the CPU ran out", Binding(0, (), 0, 3500, 0), "not enough CPU or memory"),
    ("the memory ran out", Binding(0, (), 0, 0, 400_000), "not enough CPU or memory"),
    ("bare metal on a used node", Binding(0, (0, 1), 1000, 0, 0, exclusive=True), "not empty"),
    ("a node held whole", Binding(1, (), 0, 100, 0), "held whole"),
    ("a GPU index twice", Binding(0, (1, 1), 100, 0, 0), "bad GPU indices"),
    ("a GPU the node lacks", Binding(0, (2,), 100, 0, 0), "bad GPU indices"),
]


@pytest.mark.parametrize("binding, message", [s[1:] for s in STALE], ids=[s[0] for s in STALE])
def test_assume_refuses_what_no_longer_fits(binding: Binding, message: str) -> None:
    state = two_nodes()
    state.assume(Placement("x", (Binding(0, (0,), 500, 1000, 0),)))
    state.assume(Placement("y", (Binding(1, (0, 1), 1000, 4000, 0, exclusive=True),)))
    before = snapshot(state)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        state.assume(Placement("late", (binding,)))
    assert_unchanged(state, before)


def test_assume_checks_every_binding_before_changing_any() -> None:
    state = make_state(*leaves(("L1", "S1", 2)))
    plan = Scheduler("bestfit").place(state, gang("g", 2))
    assert isinstance(plan, Placement) and plan.nodes == (0, 1)
    state.assume(Placement("sneaky", (Binding(1, (), 0, 1000, 0),)))  # the second node fills
    before = snapshot(state)
    with pytest.raises(ValueError, match="not empty"):
        state.assume(plan)
    assert_unchanged(state, before)


def test_place_decides_without_changing_the_state() -> None:
    state = two_nodes()
    before = snapshot(state)
    assert isinstance(Scheduler("bestfit").place(state, share_pod("s", 300)), Placement)
    assert_unchanged(state, before)


def test_forget_restores_the_state_exactly() -> None:
    nodes = [make_node("a", domains=(0, 0, 0, 0, 1, 1, 1, 1), leaf="L1", spine="S1")]
    nodes += [make_node(f"n{i}", gpus=g, leaf="L1", spine="S1") for i, g in enumerate((8, 4, 2))]
    nodes += [make_node(f"g{i}", leaf="L2", spine="S1") for i in range(2)]
    state = make_state(*nodes)
    empty = snapshot(state)
    scheduler = Scheduler("packing")
    mix = [gang("gg", 2), bare("bm", gpus=4), share_pod("s1", 300), share_pod("s2", 700)]
    mix += [gpu_pod("g", 2), cpu_pod("c", 4000), share_pod("s3", 450), gpu_pod("h", 4)]
    placed: list[Placement] = []
    checkpoints = []
    for req in mix:
        checkpoints.append(snapshot(state))
        decision = scheduler.bind(state, req)
        assert isinstance(decision, Placement), (req.id, decision)
        placed.append(decision)
    # Undo the last one: exactly the state before it.
    state.forget(placed[-1])
    assert_unchanged(state, checkpoints[-1])
    # Undo the rest in a scrambled order: exactly the empty fleet.
    for i in np.random.default_rng(3).permutation(len(placed) - 1):
        state.forget(placed[i])
    assert_unchanged(state, empty)
    assert state.empty().all()


def test_named_policies_work_without_importing_profiles_first() -> None:
    # Regression: the profiles register on import, and `replay`/`Scheduler` did not import them.
    code = "from cardhour.scheduler.engine import Scheduler; Scheduler('bestfit')"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_gang_takes_fewer_leaves_across_spines_over_more_under_one() -> None:
    """Fewest leaves first, then fewest spines: 2 leaves on two spines beat 3 on one (the
    largest leaf, then the smallest that completes the gang)."""
    nodes = [
        make_node(f"{leaf}-{i}", leaf=leaf, spine=spine)
        for leaf, spine, free in (("L0", "S0", 3), ("L1", "S0", 3), ("L2", "S0", 3))
        + (("L3", "S1", 7), ("L4", "S2", 7))
        for i in range(free)
    ]
    state = make_state(*nodes)
    decision = Scheduler("bestfit").place(state, Request("g", num_gpu=8, nodes=8))
    assert isinstance(decision, Placement)
    assert decision.leaves == ("L0", "L3") and decision.spines == ("S0", "S1")


def test_assume_refuses_two_bindings_on_one_node_and_forget_what_is_not_held() -> None:
    state = make_state(make_node("n0", gpus=2, cpu=1000))
    twice = Placement("p", (Binding(0, (0,), 600, 600, 0), Binding(0, (1,), 600, 600, 0)))
    before = snapshot(state)
    with pytest.raises(ValueError, match="one binding per node"):
        state.assume(twice)
    with pytest.raises(ValueError, match="not held"):
        state.forget(Placement("q", (Binding(0, (0,), 500, 500, 0),)))
    assert_unchanged(state, before)


@pytest.mark.parametrize("policy", ["cardhour", "fgd", "fgd-keep-whole"])
@pytest.mark.parametrize("target", ["a", "b", "c"])
def test_a_request_pinned_to_a_node_goes_there_whatever_the_compiled_table_prefers(
    policy: str, target: str
) -> None:
    """The FGD policies decide containers from a compiled table of shapes; a request pinned to
    a node (where its volume or kept disk is) must still land only there, whichever node FGD
    itself would choose."""
    state = make_state(make_node("a"), make_node("b"), make_node("c"))
    set_free(state, 0, [1000] * 7 + [0])
    set_free(state, 1, [1000] * 4 + [0] * 4)
    seen = [Request("s1", cpu_milli=1000, num_gpu=1, gpu_milli=1000)] * 3
    seen += [Request("s4", cpu_milli=1000, num_gpu=4, gpu_milli=1000)] * 2
    typical = TypicalWorkload.from_requests(seen)
    assert typical.weight is not None  # the compiled table decides
    scheduler = Scheduler(policy, typical)
    for rid in ("p", "q"):
        req = Request(rid, cpu_milli=1000, num_gpu=1, gpu_milli=1000, node=target)
        decision = scheduler.bind(state, req)
        assert isinstance(decision, Placement), decision
        assert [state.names[b.node] for b in decision.bindings] == [target]
