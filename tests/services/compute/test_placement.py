"""The control plane's adapter to the engine: table tests of nodes + allocations + an instance →
the placement the control plane records, or the reason it stays pending."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from cardhour.core.topology import NodeSpec
from cardhour.scheduler import (
    DEFAULT_POLICY,
    MILLI,
    FleetState,
    Pending,
    Placement,
    Request,
    Scheduler,
)
from cardhour.services.compute import placement
from cardhour.services.compute.placement import Assignment, NodeShape
from cardhour.settings import load_catalog

NVLINK = {"H100", "A800"}


def make_node(
    node_id: str,
    model: str = "H100",
    leaf: str | None = "leaf1",
    spine: str | None = "spine1",
    dc: str = "dc1",
    gpus: int = 8,
) -> NodeSpec:
    ib = leaf is not None
    return NodeSpec(
        node_id, dc, model, gpus, 64, 512, leaf, spine, 8 if ib else 0, 200 if ib else 0
    )


def fleet(nodes: Sequence[NodeSpec], used: Mapping[str, int] | None = None) -> FleetState:
    """`used[node]`: GPUs 0..k-1 held by one other instance on that node."""
    allocations = {f"other-{n}": {n: range(k)} for n, k in (used or {}).items() if k}
    return placement.build_state(nodes, NVLINK, (), allocations)


def scheduler(state: FleetState) -> Scheduler:
    return Scheduler(DEFAULT_POLICY, placement.typical_workload(placement.node_shapes(state), []))


def place(state: FleetState, model: str, count: int, dc: str | None = None) -> Assignment | Pending:
    request = placement.to_request(placement.node_shapes(state), "i1", model, count, dc)
    if isinstance(request, Pending):
        return request
    decision = scheduler(state).place(state, request)
    return decision if isinstance(decision, Pending) else placement.assignment(state, decision)


def test_eight_gpus_take_one_whole_node() -> None:
    result = place(fleet([make_node("a"), make_node("b")]), "H100", 8)
    assert isinstance(result, Assignment)
    assert result.gpus_by_node == {"a": list(range(8))}
    assert (result.data_centre, result.ib_leaves, result.ib_spines) == (
        "dc1",
        ("leaf1",),
        ("spine1",),
    )


def test_small_requests_pack_onto_the_fullest_node_keeping_whole_nodes_free() -> None:
    state = fleet([make_node("a"), make_node("b"), make_node("c")], {"b": 5, "c": 2})
    result = place(state, "H100", 2)
    assert isinstance(result, Assignment)
    assert result.gpus_by_node == {"b": [5, 6]}


def test_fgd_keeps_a_four_gpu_block_rather_than_fit_tightest() -> None:
    # Plain best fit would take the node with 4 free GPUs; FGD (the default policy) takes one of
    # the 5 and leaves both nodes able to run a 4-GPU job. The empty node stays whole either way.
    state = fleet([make_node("a"), make_node("b"), make_node("c")], {"b": 4, "c": 3})
    result = place(state, "H100", 1)
    assert isinstance(result, Assignment)
    assert result.gpus_by_node == {"c": [3]}


def test_sixteen_gpus_take_two_nodes_under_the_tightest_leaf() -> None:
    nodes = [
        make_node("a1", leaf="leaf1"),
        make_node("a2", leaf="leaf1"),
        make_node("b1", leaf="leaf2"),
        make_node("b2", leaf="leaf2"),
        make_node("b3", leaf="leaf2"),
        make_node("c1", leaf="leaf3"),
        make_node("c2", leaf="leaf3"),
    ]
    result = place(fleet(nodes, {"a2": 1}), "H100", 16)
    assert isinstance(result, Assignment)
    assert result.ib_leaves == ("leaf3",)
    assert result.gpus_by_node == {"c1": list(range(8)), "c2": list(range(8))}


def test_gang_spans_fewest_leaves_when_no_leaf_suffices() -> None:
    nodes = [
        make_node(f"{leaf}-{i}", leaf=leaf)
        for leaf, n in [("l1", 2), ("l2", 1), ("l3", 2)]
        for i in range(n)
    ]
    state = fleet(nodes)
    for count, leaves in [(24, 2), (32, 2), (40, 3)]:
        result = place(state, "H100", count)
        assert isinstance(result, Assignment)
        assert (len(result.ib_leaves), len(result.gpus_by_node)) == (leaves, count // 8)
    assert isinstance(place(state, "H100", 48), Pending)


def test_gang_never_mixes_data_centres() -> None:
    nodes = [make_node("a", dc="dc1"), make_node("b", dc="dc2", leaf="x", spine="y")]
    result = place(fleet(nodes), "H100", 16)
    assert isinstance(result, Pending)
    assert "one data centre" in result.reason


def test_data_centre_restricts_the_nodes() -> None:
    state = fleet([make_node("a", dc="dc1"), make_node("b", dc="dc2")])
    result = place(state, "H100", 8, dc="dc2")
    assert isinstance(result, Assignment)
    assert (result.gpus_by_node, result.data_centre) == ({"b": list(range(8))}, "dc2")
    full = fleet([make_node("a", dc="dc1"), make_node("b", dc="dc2")], {"b": 8})
    pending = place(full, "H100", 1, dc="dc2")
    assert isinstance(pending, Pending)
    assert pending.reason == "0/2 nodes fit: 1 other data centre, 1 insufficient GPU"


@pytest.mark.parametrize(
    ("nodes", "used", "model", "count", "reason"),
    [
        ([make_node("a", model="A800")], {}, "H100", 1, "0/1 nodes fit: 1 wrong GPU model"),
        ([make_node("a"), make_node("b")], {"a": 7, "b": 8}, "H100", 2, "2 insufficient GPU"),
        ([make_node("a")], {}, "H100", 12, "ask for a multiple of 8 (whole nodes)"),
        (
            [make_node("a", leaf=None, spine=None), make_node("b", leaf=None, spine=None)],
            {},
            "H100",
            16,
            "2 no InfiniBand",
        ),
        ([make_node("a"), make_node("b")], {"b": 1}, "H100", 16, "1 node in use"),
        ([make_node("a", gpus=1)], {}, "H100", 1024, "need 1024 whole nodes; at most 128"),
    ],
)
def test_pending_reasons(
    nodes: list[NodeSpec], used: dict[str, int], model: str, count: int, reason: str
) -> None:
    result = place(fleet(nodes, used), model, count)
    assert isinstance(result, Pending)
    assert reason in result.reason


def test_bind_reserves_within_a_cycle_and_forget_gives_back() -> None:
    state = fleet([make_node("a")])
    shapes = placement.node_shapes(state)
    engine = scheduler(state)
    six, four = (placement.to_request(shapes, i, "H100", k) for i, k in [("six", 6), ("four", 4)])
    assert isinstance(six, Request) and isinstance(four, Request)
    first = engine.bind(state, six)
    assert isinstance(first, Placement)
    second = engine.bind(state, four)
    assert isinstance(second, Pending) and "1 insufficient GPU" in second.reason
    state.forget(first)  # what the cycle does when the node's version moved
    assert isinstance(engine.bind(state, four), Placement)


def test_requests_are_containers_up_to_a_node_then_gangs_of_whole_nodes() -> None:
    shapes = {"H100": NodeShape(8, 192_000, 2_097_152)}
    two = placement.to_request(shapes, "i", "H100", 2, "bj1")
    assert two == Request(
        "i", 48_000, 524_288, 2, MILLI, frozenset({"H100"}), nodes=0, data_centre="bj1"
    )
    gang = placement.to_request(shapes, "g", "H100", 32)
    assert isinstance(gang, Request)
    assert (gang.nodes, gang.num_gpu, gang.cpu_milli, gang.kind) == (4, 8, 192_000, "gang")
    unknown = placement.to_request(shapes, "u", "B200", 4)  # the engine reports "wrong GPU model"
    assert isinstance(unknown, Request) and unknown.gpu_models == frozenset({"B200"})


def test_node_shape_is_the_largest_schedulable_node_of_the_model() -> None:
    nodes = [make_node("big", gpus=8), make_node("small", gpus=4), make_node("old", gpus=16)]
    state = placement.build_state(nodes, NVLINK, unschedulable={"old"})
    assert placement.node_shapes(state) == {"H100": NodeShape(8, 64_000, 524_288)}


def test_state_holds_containers_proportionally_and_gangs_whole() -> None:
    nodes = [make_node("a"), make_node("b"), make_node("c"), make_node("p", model="RTX4090")]
    allocations: dict[str, dict[str, Sequence[int]]] = {
        "two": {"a": [0, 1]},
        "gang": {"b": range(8), "c": range(8)},
        "pcie": {"p": [4, 5, 6]},
    }
    state = placement.build_state(nodes, NVLINK, (), allocations)
    a, b, p = state.index["a"], state.index["b"], state.index["p"]
    assert (state.cpu_free[a], state.mem_free[a]) == (64_000 * 6 // 8, 524_288 * 6 // 8)
    assert list(state.gpu_free[a]) == [0, 0] + [MILLI] * 6
    assert state.exclusive[b] and not state.exclusive[a]
    assert list(state.domain[a]) == [0] * 8  # NVLink: one domain
    assert list(state.domain[p]) == [0] * 4 + [1] * 4  # PCIe: two switches
    assert state.cpu_free[p] == 64_000 - 64_000 * 3 // 8


def test_pcie_node_keeps_a_container_under_one_switch() -> None:
    state = fleet([make_node("p", model="RTX4090", leaf=None, spine=None)], {"p": 2})
    result = place(state, "RTX4090", 4)
    assert isinstance(result, Assignment)
    assert result.gpus_by_node == {"p": [4, 5, 6, 7]}  # not 2, 3 + 4, 5 across both switches


def test_typical_workload_from_recent_requests_or_a_default() -> None:
    shapes = {"H100": NodeShape(8, 64_000, 524_288), "A800": NodeShape(8, 64_000, 524_288)}
    default = placement.typical_workload(shapes, [])
    assert sorted(zip(default.count.tolist(), default.models, strict=True)) == sorted(
        (k, frozenset({m})) for m in ("A800", "H100") for k in (1, 2, 4, 8)
    )
    recent = placement.typical_workload(shapes, [("H100", 1), ("H100", 1), ("H100", 12)])
    assert recent.count.tolist() == [1] and np.allclose(recent.p, [1.0])  # 12 GPUs: no request
    assert len(placement.typical_workload({}, [])) == 1  # no GPU nodes at all


def test_demo_fleet_places_by_model_and_topology() -> None:
    catalog = load_catalog()
    nvlink = {m.id for m in catalog.gpu_models if m.nvlink}
    state = placement.build_state(catalog.nodes, nvlink)
    assert len(state) == 44
    result = place(state, "H100", 32, dc="bj1")
    assert isinstance(result, Assignment)
    assert result.ib_leaves == ("bj1-h100-leaf1",) and len(result.gpus_by_node) == 4
    pending = place(state, "RTX4090", 16)
    assert isinstance(pending, Pending)
    assert "12 no InfiniBand" in pending.reason and "32 wrong GPU model" in pending.reason


def test_a_container_fits_the_smaller_node_of_a_model_with_mixed_sizes() -> None:
    """Shares are set at the leanest CPU per GPU, so an empty 4-GPU node takes 4 GPUs even
    when the model's largest node is 8 GPUs with twice the CPU per GPU; the rebuild agrees."""
    big = NodeSpec("big", "dc", "X", 8, 128, 1024, None, None, 0, 0)
    small = NodeSpec("small", "dc", "X", 4, 32, 256, None, None, 0, 0)
    busy = {"i0": {"big": range(8)}}
    state = placement.build_state([big, small], (), allocations=busy)
    shapes = placement.node_shapes(state)
    assert shapes["X"] == NodeShape(8, 64_000, 524_288)
    request = placement.to_request(shapes, "i1", "X", 4)
    assert isinstance(request, Request) and request.cpu_milli == 32_000
    decision = Scheduler("bestfit").bind(state, request)
    assert isinstance(decision, Placement)
    where = placement.assignment(state, decision)
    rebuilt = placement.build_state(
        [big, small], (), allocations={**busy, "i1": where.gpus_by_node}
    )
    assert rebuilt.cpu_free.tolist() == state.cpu_free.tolist() == [64_000, 0]


def test_build_held_returns_each_instance_placement_as_held() -> None:
    """What the defragmentation planner lists as running: forgetting every held placement
    gives back an empty fleet; an allocation on an unknown node holds nothing and is left out."""
    nodes = [make_node("a"), make_node("b"), make_node("c")]
    allocations: dict[str, dict[str, Sequence[int]]] = {
        "two": {"a": [0, 1]},
        "gang": {"b": range(8), "c": range(8)},
        "ghost": {"gone": [0]},
    }
    state, held = placement.build_held(nodes, NVLINK, (), allocations)
    assert sorted(held) == ["gang", "two"]
    a = state.index["a"]
    assert held["two"].bindings[0].node == a and held["two"].bindings[0].gpus == (0, 1)
    assert held["two"].bindings[0].cpu_milli == 64_000 * 2 // 8
    assert all(b.exclusive for b in held["gang"].bindings)
    for p in held.values():
        state.forget(p)
    empty = placement.build_state(nodes, NVLINK)
    assert state.cpu_free.tolist() == empty.cpu_free.tolist()
    assert state.gpu_free.tolist() == empty.gpu_free.tolist()


def test_bare_metal_takes_only_an_empty_node_and_holds_it_whole() -> None:
    nodes = [make_node("n1"), make_node("n2")]
    state = fleet(nodes, {"n1": 1})  # one GPU busy on n1
    shapes = placement.node_shapes(state)
    request = placement.to_request(shapes, "bm", "H100", 8, bare_metal=True)
    assert isinstance(request, Request) and request.nodes == 1
    decision = scheduler(state).place(state, request)
    assert not isinstance(decision, Pending)
    assert placement.assignment(state, decision).gpus_by_node == {"n2": list(range(8))}
    # rebuilt from the DB's allocations, the node stays exclusive: no CPU left for anyone
    held = {"bm": {"n2": range(8)}}
    rebuilt, placed = placement.build_held(nodes, NVLINK, (), held, exclusive={"bm"})
    assert placed["bm"].bindings[0].exclusive
    i = rebuilt.index["n2"]
    assert rebuilt.cpu_free[i] == 0
    _, as_container = placement.build_held(nodes, NVLINK, (), held)
    assert not as_container["bm"].bindings[0].exclusive
    # no empty node: bare metal waits; a partial node is refused
    busy = fleet(nodes, {"n1": 1, "n2": 1})
    again = placement.to_request(placement.node_shapes(busy), "bm", "H100", 8, bare_metal=True)
    assert isinstance(again, Request)
    assert isinstance(scheduler(busy).place(busy, again), Pending)
    assert isinstance(placement.to_request(shapes, "bm", "H100", 4, bare_metal=True), Pending)
