"""The scheduling cycle on both databases: the version guard, the typical workload."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from cardhour.core.clock import ManualClock
from cardhour.core.money import Money
from cardhour.db.engine import transaction
from cardhour.db.models import UserRow
from cardhour.platform import Platform
from cardhour.services.billing import customers, ledger
from cardhour.services.compute import instances, placement, scheduling
from cardhour.services.compute.fleet import load
from cardhour.services.compute.instances import LaunchRequest
from cardhour.store.compute import nodes as node_store

WINDOW = 1000


@pytest.fixture
def user_id(platform: Platform, clock: ManualClock) -> str:
    with transaction(platform.sessions) as s:
        user = customers.sign_up(
            s, "rich@example.com", "password123", clock.now(), customers.Trial(Money.zero())
        )
        ledger.top_up(s, user.id, Money.parse("10000"), clock.now(), "pay-1")
        return user.id


def _launch(platform: Platform, clock: ManualClock, uid: str, gpu: str, count: int) -> str:
    """A pending instance (created now; advance the clock between launches to order them)."""
    with transaction(platform.sessions) as s:
        user = s.get(UserRow, uid)
        assert user is not None
        req = LaunchRequest(gpu=gpu, count=count)
        return instances.create(s, platform.catalog, user, req, clock.now()).id


def _cycle(platform: Platform, clock: ManualClock) -> scheduling.CycleResult:
    with transaction(platform.sessions) as s:
        return scheduling.run_cycle(s, platform.catalog, platform.policy, clock.now(), WINDOW)


def test_a_node_changed_during_the_cycle_is_forgotten_in_the_state(
    platform: Platform, clock: ManualClock, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(7):  # 7 of the 8 A800 nodes
        _launch(platform, clock, user_id, "A800", 8)
    assert len(_cycle(platform, clock).placed) == 7
    clock.advance(1)
    first = _launch(platform, clock, user_id, "A800", 8)
    clock.advance(1)
    second = _launch(platform, clock, user_id, "A800", 8)
    real = node_store.bump_version
    calls: list[str] = []

    def conflict_once(session: Session, node_id: str, expected: int) -> bool:
        calls.append(node_id)
        return len(calls) > 1 and real(session, node_id, expected)

    monkeypatch.setattr(node_store, "bump_version", conflict_once)
    result = _cycle(platform, clock)
    # the first lost the race for the last free node; the second gets it, as the state forgot
    # the first's placement instead of counting its GPUs as taken
    assert result.pending == {first: "a node changed during the cycle; retrying"}
    assert result.placed == [second]
    assert calls == ["bj1-a800-08", "bj1-a800-08"]


def test_typical_workload_is_the_most_recent_requests(
    platform: Platform, clock: ManualClock, user_id: str
) -> None:
    with transaction(platform.sessions) as s:
        shapes = placement.node_shapes(load(s, platform.catalog).state)
        default = scheduling.typical_workload(s, shapes, WINDOW)
    assert len(default) == 3 * 4  # 1, 2, 4, 8 GPUs of each of the 3 models
    for count in (4, 1, 1):
        _launch(platform, clock, user_id, "H100", count)
        clock.advance(1)
    with transaction(platform.sessions) as s:
        recent = scheduling.typical_workload(s, shapes, window=2)
    assert recent.count.tolist() == [1] and recent.models == (frozenset({"H100"}),)
