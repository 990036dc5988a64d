"""Replacing a failed node of a multi-node instance (`scheduler.replace`): the closest free
node of the same model and size in the same data centre, or None."""

from __future__ import annotations

from cardhour.scheduler.replace import replacements
from tests.scheduler.factories import make_node, make_state, set_free


def _fleet():  # type: ignore[no-untyped-def]
    return make_state(
        make_node("a1", leaf="L1", spine="S1"),  # failed
        make_node("a2", leaf="L1", spine="S1"),
        make_node("b1", leaf="L2", spine="S1"),
        make_node("c1", leaf="L3", spine="S2"),  # kept
        make_node("c2", leaf="L3", spine="S2"),
        make_node("d1", leaf="L4", spine="S3"),
        make_node("x1", leaf="L1", spine="S1", dc="dc2"),  # another site
        make_node("m1", leaf="L1", spine="S1", model="H100"),  # another model
        make_node("s1", leaf="L1", spine="S1", gpus=4),  # another size
    )


def test_closest_first_then_further_then_none() -> None:
    state = _fleet()
    order = []
    while (chosen := replacements(state, ["a1"], ["c1"])) is not None:
        order.append(chosen["a1"])
        state.schedulable[state.index[chosen["a1"]]] = False  # taken: ask again
    # own leaf, a leaf the kept nodes use, own spine, anywhere on the site; never another site,
    # model or node size
    assert order == ["a2", "c2", "b1", "d1"]


def test_a_busy_node_is_no_replacement() -> None:
    state = _fleet()
    set_free(state, state.index["a2"], [1000] * 7 + [500])  # half a GPU in use
    assert replacements(state, ["a1"], ["c1"]) == {"a1": "c2"}


def test_several_failed_nodes_get_distinct_replacements() -> None:
    state = _fleet()
    assert replacements(state, ["c1", "a1"], []) == {"a1": "a2", "c1": "c2"}
    # the kept nodes and the other failed ones are never chosen
    assert replacements(state, ["a1", "a2"], ["c1", "c2"]) == {"a1": "b1", "a2": "d1"}
    assert replacements(state, ["a1", "a2", "b1"], ["c1", "c2"]) is None
