"""The launch's capacity summary answers exactly what a full placement on the all-free fleet
answered (the pre-summary check): the same `no_capacity` message, node counts included, and
the same model shapes, on varied fleets and requests; and it is rebuilt when, and only when,
the fleet inventory changes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from cardhour.core.clock import ManualClock
from cardhour.core.errors import NoCapacity
from cardhour.core.money import Money
from cardhour.core.topology import NodeSpec
from cardhour.db.engine import transaction
from cardhour.db.models import NodeRow, UserRow
from cardhour.platform import Platform
from cardhour.scheduler import DEFAULT_POLICY, MAX_GANG_NODES, Pending, Scheduler
from cardhour.services.billing import customers, ledger
from cardhour.services.compute import capacity, fleet, instances, placement, scheduling
from cardhour.services.compute.capacity import FleetCapacity
from cardhour.services.compute.instances import LaunchRequest
from cardhour.settings import load_catalog
from cardhour.store.compute import nodes as node_store

NVLINK = {"H100"}


def full_placement_answer(
    specs: Sequence[NodeSpec],
    unschedulable: set[str],
    policy: str,
    model: str,
    count: int,
    bare: bool,
) -> str | None:
    """The check as it was: the whole fleet, all free, and a placement of the request on it."""
    state = placement.build_state(specs, NVLINK, unschedulable)
    shapes = placement.node_shapes(state)
    engine = Scheduler(policy, placement.typical_workload(shapes, []))
    request = placement.to_request(shapes, "launch", model, count, bare_metal=bare)
    ever = request if isinstance(request, Pending) else engine.place(state, request, False)
    if isinstance(ever, Pending):
        return f"no {count} × {model} can be placed on this fleet: {ever.reason}"
    return None


def summary_answer(summary: FleetCapacity, model: str, count: int, bare: bool) -> str | None:
    try:
        summary.check(model, count, bare)
    except NoCapacity as exc:
        return exc.message
    return None


def classes_of(specs: Sequence[NodeSpec], unschedulable: set[str]) -> list[tuple[object, ...]]:
    """What `store.compute.nodes.node_classes` returns for these nodes (its GROUP BY)."""
    found = Counter(
        (
            s.id not in unschedulable,
            s.data_centre,
            s.gpu_model,
            s.gpu_count,
            s.cpus,
            s.memory_gb,
            s.ib_leaf is not None,
        )
        for s in specs
    )
    return [(*key, n) for key, n in sorted(found.items())]


@st.composite
def fleets(draw: st.DrawFn) -> tuple[list[NodeSpec], set[str]]:
    specs = []
    for i in range(draw(st.integers(0, 40))):
        model = draw(st.sampled_from(["H100", "A800", "RTX4090", ""]))
        gpus = 0 if model == "" else draw(st.sampled_from([1, 2, 4, 8, 8, 8]))
        leaf = draw(st.sampled_from([None, "l1", "l2", "l3"]))
        specs.append(
            NodeSpec(
                id=f"n{i:02d}",
                data_centre=draw(st.sampled_from(["bj1", "wh1", "sh1"])),
                gpu_model=model,
                gpu_count=gpus,
                cpus=draw(st.sampled_from([8, 32, 64, 128])),
                memory_gb=draw(st.sampled_from([64, 512, 1024])),
                ib_leaf=leaf,
                ib_spine=None if leaf is None else draw(st.sampled_from(["s1", "s2"])),
                ib_rails=0 if leaf is None else 8,
                ib_gbps_per_rail=0 if leaf is None else 200,
            )
        )
    unschedulable = {s.id for s in specs if draw(st.integers(0, 4)) == 0}
    return specs, unschedulable


counts = st.one_of(
    st.integers(1, 20),
    st.sampled_from([16, 24, 32, 40, 64, 8 * MAX_GANG_NODES, 8 * (MAX_GANG_NODES + 1)]),
)
requests = st.lists(
    st.tuples(st.sampled_from(["H100", "A800", "RTX4090", "B200"]), counts, st.booleans()),
    min_size=1,
    max_size=8,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets(), requests, st.sampled_from([DEFAULT_POLICY, "bestfit"]))
def test_the_summary_answers_what_a_full_placement_answered(
    fleet_and_drained: tuple[list[NodeSpec], set[str]],
    asked: list[tuple[str, int, bool]],
    policy: str,
) -> None:
    specs, unschedulable = fleet_and_drained
    summary = FleetCapacity.of(classes_of(specs, unschedulable))
    state = placement.build_state(specs, NVLINK, unschedulable)
    assert summary.shapes == placement.node_shapes(state)
    assert summary.nodes == len(specs)
    for model, count, bare in asked:
        expected = full_placement_answer(specs, unschedulable, policy, model, count, bare)
        assert summary_answer(summary, model, count, bare) == expected, (model, count, bare)
        # asked again: the remembered answer is the same
        assert summary_answer(summary, model, count, bare) == expected


DEMO_TABLE = [
    # (model, count, bare metal, the refusal, or None when it could fit)
    ("H100", 1, False, None),
    ("H100", 8, False, None),
    ("H100", 16, False, None),
    ("H100", 8 * 16, False, None),  # every H100 node of bj1
    (
        "H100",
        8 * 24,
        False,
        "no 192 × H100 can be placed on this fleet: need 24 whole free nodes with InfiniBand "
        "in one data centre, at most 16 free; 0/44 nodes fit: 20 wrong GPU model",
    ),
    ("H100", 8, True, None),
    (
        "H100",
        12,
        False,
        "no 12 × H100 can be placed on this fleet: 12 GPUs span several nodes: ask for a "
        "multiple of 8 (whole nodes) or at most one node's worth",
    ),
    (
        "H100",
        8 * 17,
        False,
        "no 136 × H100 can be placed on this fleet: need 17 whole free nodes with InfiniBand "
        "in one data centre, at most 16 free; 0/44 nodes fit: 20 wrong GPU model",
    ),
    (
        "H100",
        8 * 25,
        False,
        "no 200 × H100 can be placed on this fleet: need 25 whole free nodes, 24 free; "
        "0/44 nodes fit: 20 wrong GPU model",
    ),
    (
        "RTX4090",
        16,
        False,
        "no 16 × RTX4090 can be placed on this fleet: need 2 whole free nodes, 0 free; "
        "0/44 nodes fit: 32 wrong GPU model, 12 no InfiniBand",
    ),
    ("RTX4090", 8, True, None),
    (
        "A800",
        9,
        False,
        "no 9 × A800 can be placed on this fleet: 9 GPUs span several nodes: ask for a "
        "multiple of 8 (whole nodes) or at most one node's worth",
    ),
    (
        "H100",
        8 * 129,
        False,
        "no 1032 × H100 can be placed on this fleet: 1032 GPUs need 129 whole nodes; at most "
        "128 fit",
    ),
]


@pytest.mark.parametrize(("model", "count", "bare", "refusal"), DEMO_TABLE)
def test_demo_fleet_table(model: str, count: int, bare: bool, refusal: str | None) -> None:
    """The demo fleet (16 H100 + 8 A800 nodes in bj1, 8 H100 + 12 RTX4090 in wh1)."""
    specs = load_catalog().nodes
    summary = FleetCapacity.of(classes_of(specs, set()))
    assert summary_answer(summary, model, count, bare) == refusal
    assert full_placement_answer(specs, set(), DEFAULT_POLICY, model, count, bare) == refusal


@pytest.fixture
def user_id(platform: Platform, clock: ManualClock) -> str:
    with transaction(platform.sessions) as s:
        user = customers.sign_up(
            s, "rich@example.com", "password123", clock.now(), customers.Trial(Money.zero())
        )
        ledger.top_up(s, user.id, Money.parse("100000"), clock.now(), "pay-1")
        return user.id


def _version(platform: Platform) -> str | None:
    with transaction(platform.sessions) as s:
        return node_store.inventory_version(s)


def _answer(platform: Platform, model: str, count: int, bare: bool = False) -> str | None:
    """The summary's answer on the platform's database, beside the full placement's on the
    fleet as the database holds it."""
    with transaction(platform.sessions) as s:
        got = summary_answer(capacity.current(s), model, count, bare)
        rows = node_store.list_nodes(s)
        specs = [fleet.spec_of(r) for r in rows]
        drained = {r.id for r in rows if not r.schedulable}
    assert got == full_placement_answer(specs, drained, DEFAULT_POLICY, model, count, bare)
    return got


def test_node_classes_group_the_fleet_as_the_summary_needs(platform: Platform) -> None:
    with transaction(platform.sessions) as s:
        node_store.drain(s, "bj1-a800-01", "test")
    with transaction(platform.sessions) as s:
        rows = node_store.list_nodes(s)
        specs = [fleet.spec_of(r) for r in rows]
        drained = {r.id for r in rows if not r.schedulable}
        assert [tuple(r) for r in node_store.node_classes(s)] == classes_of(specs, drained)


def test_the_summary_is_rebuilt_when_the_inventory_changes_and_only_then(
    platform: Platform, clock: ManualClock, user_id: str
) -> None:
    first = _version(platform)
    assert first is not None
    with transaction(platform.sessions) as s:
        summary = capacity.current(s)
    # launches, placements and a sync that changes nothing leave the version alone
    with transaction(platform.sessions) as s:
        user = s.get(UserRow, user_id)
        assert user is not None
        instances.create(s, platform.catalog, user, LaunchRequest(gpu="A800", count=8), clock.now())
    with transaction(platform.sessions) as s:
        scheduling.run_cycle(s, platform.catalog, platform.policy, clock.now(), 1000)
    platform.inventory.step()
    assert _version(platform) == first
    with transaction(platform.sessions) as s:
        assert capacity.current(s) is summary  # built once for this version
    # a drain rolled back changes nothing
    with pytest.raises(RuntimeError), transaction(platform.sessions) as s:
        node_store.drain(s, "bj1-a800-01", "test")
        raise RuntimeError
    assert _version(platform) == first
    # drain every A800 node: a new version, and the answer says so
    with transaction(platform.sessions) as s:
        for row in node_store.list_nodes(s):
            if row.gpu_model == "A800":
                node_store.drain(s, row.id, "test")
    drained = _version(platform)
    assert drained != first
    assert _answer(platform, "A800", 1) == (
        "no 1 × A800 can be placed on this fleet: 0/44 nodes fit: 36 wrong GPU model, "
        "8 unschedulable"
    )
    # resumed: another version, and it fits again
    with transaction(platform.sessions) as s:
        fleet.resume(s, "bj1-a800-01")
    assert _version(platform) not in (first, drained)
    assert _answer(platform, "A800", 8) is None
    assert _answer(platform, "A800", 16) == (
        "no 16 × A800 can be placed on this fleet: need 2 whole free nodes, 1 free; 0/44 nodes "
        "fit: 36 wrong GPU model, 7 unschedulable"
    )
    # the backend stops reporting a node, then reports a new one: each sync is a new version
    with transaction(platform.sessions) as s:
        specs = [fleet.spec_of(r) for r in node_store.list_nodes(s) if r.id != "wh1-h100-01"]
    before = _version(platform)
    assert _answer(platform, "H100", 8 * 25) == (
        "no 200 × H100 can be placed on this fleet: need 25 whole free nodes, 24 free; "
        "0/44 nodes fit: 13 wrong GPU model, 7 unschedulable"
    )
    with transaction(platform.sessions) as s:
        fleet.sync_nodes(s, specs)
    gone = _version(platform)
    assert gone != before
    assert _answer(platform, "H100", 8 * 25) == (
        "no 200 × H100 can be placed on this fleet: need 25 whole free nodes, 23 free; "
        "0/44 nodes fit: 13 wrong GPU model, 8 unschedulable"
    )
    extra = NodeSpec("wh1-h100-99", "wh1", "H100", 8, 128, 1024, None, None, 0, 0)
    with transaction(platform.sessions) as s:
        fleet.sync_nodes(s, [*specs, extra])
        assert s.scalar(select(NodeRow.id).where(NodeRow.id == extra.id)) == extra.id
    assert _version(platform) != gone
    assert _answer(platform, "H100", 8 * 25) == (
        "no 200 × H100 can be placed on this fleet: need 25 whole free nodes, 23 free; "
        "0/45 nodes fit: 13 wrong GPU model, 8 unschedulable, 1 no InfiniBand"
    )
