"""Billing's queries (flush, never commit), on SQLite and PostgreSQL: the metered side of
instance rows (`store.billing.usage`) and the grant accounts an owner may spend from
(`store.billing.ledger.active_grant_accounts`)."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from cardhour.db.engine import transaction
from cardhour.db.models import GrantMemberRow, GrantRow, InstanceRow
from cardhour.store.billing import ledger, usage
from tests.store.conftest import NOW, add_instance, add_user


def test_lock_running_reads_running_rows_only_in_creation_order(
    sessions: sessionmaker[Session],
) -> None:
    with transaction(sessions) as s:
        owner = add_user(s, 1)
        s.flush()
        add_instance(s, "b", owner, "running", NOW)
        add_instance(s, "a", owner, "running", NOW + timedelta(seconds=1))
        add_instance(s, "c", owner, "stopped", NOW - timedelta(seconds=1))
    with transaction(sessions) as s:
        rows = usage.lock_running(s)
    assert [r.id for r in rows] == ["b", "a"]
    assert all(isinstance(r, usage.RunningRow) and r.status == "running" for r in rows)
    assert rows[0].price_micros == 1_900_000 and rows[0].currency == "CNY"


def test_save_charges_writes_tuples_and_orm_rows_without_dirtying_the_session(
    sessions: sessionmaker[Session],
) -> None:
    with transaction(sessions) as s:
        owner = add_user(s, 1)
        s.flush()
        add_instance(s, "a", owner, "running", NOW)
        add_instance(s, "b", owner, "running", NOW)
    later = NOW + timedelta(minutes=1)
    with transaction(sessions) as s:
        plain = next(r for r in usage.lock_running(s) if r.id == "a")
        orm = s.get(InstanceRow, "b")
        assert orm is not None
        usage.save_charges(s, [(plain, 31_667, later), (orm, 42, later)])
        assert orm.billed_micros == 42 and orm not in s.dirty
    with transaction(sessions) as s:
        got = {r.id: (r.billed_micros, r.charged_at) for r in s.scalars(select(InstanceRow))}
    assert got["a"][0] == 31_667 and got["b"][0] == 42
    assert all(at is not None and at.replace(tzinfo=UTC) == later for _, at in got.values())


@pytest.mark.parametrize("owners", [3, ledger._IN_LIST_LIMIT + 5])
def test_active_grant_accounts_by_owner_without_expired_grants(
    sessions: sessionmaker[Session], owners: int
) -> None:
    """Both ways of the lookup (an IN list, and a scan filtered in Python above the limit)."""
    with transaction(sessions) as s:
        users = [add_user(s, n) for n in range(owners)]
        s.flush()
        for gid, expires in (("live", NOW + timedelta(days=1)), ("old", NOW)):
            s.add(
                GrantRow(
                    id=gid,
                    title=gid,
                    account_key=f"grant:{gid}",
                    card_hours=10,
                    gpu_models="H100",
                    valid_from=NOW - timedelta(days=1),
                    expires_at=expires,
                    created_at=NOW,
                )
            )
        s.flush()
        for uid in users[:2]:
            s.add(GrantMemberRow(grant_id="live", user_id=uid))
            s.add(GrantMemberRow(grant_id="old", user_id=uid))
        s.add(GrantMemberRow(grant_id="live", user_id=users[-1]))
    with transaction(sessions) as s:
        found = ledger.active_grant_accounts(s, users[1:], NOW)
    assert found == {users[1]: ["grant:live"], users[-1]: ["grant:live"]}
