"""Compute's queries on instances (flush, never commit), on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from cardhour.db.engine import transaction
from cardhour.store.compute import instances
from tests.store.conftest import NOW, add_instance, add_user


def test_get_owned_finds_by_id_or_live_name_and_never_another_owners(
    sessions: sessionmaker[Session],
) -> None:
    with transaction(sessions) as s:
        alice, bob = add_user(s, 1), add_user(s, 2)
        s.flush()
        add_instance(s, "i-old", alice, "terminated", NOW).name = "x"
        add_instance(s, "i-new", alice, "running", NOW + timedelta(seconds=1)).name = "x"
        add_instance(s, "i-bob", bob, "running", NOW)
    with transaction(sessions) as s:
        assert (got := instances.get_owned(s, alice, "x")) is not None and got.id == "i-new"
        assert (got := instances.get_owned(s, alice, "i-old")) is not None and got.id == "i-old"
        assert instances.get_owned(s, alice, "i-bob") is None
        assert instances.get_owned(s, bob, "x") is None
        assert instances.get_owned(s, alice, "x'; drop table instances; --") is None
        assert [r.id for r in instances.list_owned(s, alice)] == ["i-new"]
        assert [r.id for r in instances.list_owned(s, alice, include_terminated=True)] == [
            "i-old",
            "i-new",
        ]
