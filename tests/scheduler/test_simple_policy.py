"""Table tests: nodes + request → expected placement, or the reason it stays pending."""

from __future__ import annotations

import pytest

from cardhour.core.topology import NodeSpec
from cardhour.scheduler import (
    NodeState,
    Placement,
    PlacementRequest,
    SimplePolicy,
    Snapshot,
    Unschedulable,
)


def make_node(
    node_id: str,
    model: str = "H100",
    used: int = 0,
    leaf: str | None = "leaf1",
    spine: str | None = "spine1",
    dc: str = "dc1",
    gpus: int = 8,
) -> NodeState:
    spec = NodeSpec(
        node_id, dc, model, gpus, 64, 512, leaf, spine, 8 if leaf else 0, 200 if leaf else 0
    )
    return NodeState(spec, list(range(used, gpus)))


def place(nodes: list[NodeState], model: str, count: int) -> Placement | Unschedulable:
    return SimplePolicy().place(Snapshot(nodes), PlacementRequest((model,), count))


def test_eight_gpus_take_one_whole_node() -> None:
    result = place([make_node("a"), make_node("b")], "H100", 8)
    assert isinstance(result, Placement)
    assert result.gpus_by_node == {"a": list(range(8))}


def test_small_requests_pack_onto_the_fullest_node_keeping_whole_nodes_free() -> None:
    result = place([make_node("a"), make_node("b", used=5), make_node("c", used=2)], "H100", 2)
    assert isinstance(result, Placement)
    assert result.gpus_by_node == {"b": [5, 6]}


def test_sixteen_gpus_take_two_nodes_under_one_leaf() -> None:
    nodes = [
        make_node("a1", leaf="leaf1"),
        make_node("a2", leaf="leaf1", used=1),
        make_node("b1", leaf="leaf2"),
        make_node("b2", leaf="leaf2"),
        make_node("b3", leaf="leaf2"),
        make_node("c1", leaf="leaf3"),
        make_node("c2", leaf="leaf3"),
    ]
    result = place(nodes, "H100", 16)
    assert isinstance(result, Placement)
    assert result.ib_leaves == ("leaf3",)  # the tightest leaf that holds both
    assert sorted(result.gpus_by_node) == ["c1", "c2"]


def test_gang_spans_fewest_leaves_when_no_leaf_suffices() -> None:
    nodes = [
        make_node(f"{leaf}-{i}", leaf=leaf)
        for leaf, n in [("l1", 2), ("l2", 1), ("l3", 2)]
        for i in range(n)
    ]
    for count, leaves in [(24, 2), (32, 2), (40, 3)]:
        result = place(nodes, "H100", count)
        assert isinstance(result, Placement)
        assert (len(result.ib_leaves), result.node_count) == (leaves, count // 8)
    assert isinstance(place(nodes, "H100", 48), Unschedulable)


def test_gang_never_mixes_data_centres() -> None:
    nodes = [make_node("a", dc="dc1"), make_node("b", dc="dc2", leaf="x", spine="y")]
    result = place(nodes, "H100", 16)
    assert isinstance(result, Unschedulable)
    assert "one data centre" in result.reason


@pytest.mark.parametrize(
    ("nodes", "model", "count", "reason"),
    [
        ([make_node("a", model="A800")], "H100", 1, "1 wrong GPU model"),
        ([make_node("a", used=7), make_node("b", used=8)], "H100", 2, "2 insufficient free GPUs"),
        ([make_node("a")], "H100", 12, "ask for a multiple of 8"),
        (
            [make_node("a", leaf=None, spine=None), make_node("b", leaf=None, spine=None)],
            "H100",
            16,
            "2 no InfiniBand",
        ),
        ([make_node("a"), make_node("b", used=1)], "H100", 16, "1 not a whole free node"),
    ],
)
def test_unschedulable_reasons(nodes: list[NodeState], model: str, count: int, reason: str) -> None:
    result = place(nodes, model, count)
    assert isinstance(result, Unschedulable)
    assert reason in result.reason


def test_snapshot_apply_reserves_within_a_cycle() -> None:
    snap = Snapshot([make_node("a")])
    policy = SimplePolicy()
    first = policy.place(snap, PlacementRequest(("H100",), 6))
    assert isinstance(first, Placement)
    snap.apply(first)
    second = policy.place(snap, PlacementRequest(("H100",), 4))
    assert isinstance(second, Unschedulable)
    assert "insufficient free GPUs" in second.reason
