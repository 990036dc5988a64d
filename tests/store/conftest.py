"""Store tests talk to the database directly: a session factory per test (SQLite and
PostgreSQL, via `database_url`) and small row builders."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from cardhour.db.engine import make_engine, make_sessionmaker
from cardhour.db.models import InstanceRow, UserRow

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def sessions(database_url: str) -> Iterator[sessionmaker[Session]]:
    engine: Engine = make_engine(database_url)
    try:
        yield make_sessionmaker(engine)
    finally:
        engine.dispose()


def add_user(s: Session, n: int) -> str:
    uid = f"u{n:04d}"
    s.add(
        UserRow(id=uid, email=f"{uid}@example.com", password_hash="x", role="user", created_at=NOW)
    )
    return uid


def add_instance(s: Session, iid: str, owner: str, status: str, created: datetime) -> InstanceRow:
    row = InstanceRow(
        id=iid,
        owner_id=owner,
        name=iid,
        gpu_model="H100",
        gpu_count=1,
        image="ubuntu",
        plan="on_demand",
        status=status,
        desired="running",
        price_micros=1_900_000,
        currency="CNY",
        running_since=created if status == "running" else None,
        charged_at=created,
        created_at=created,
        updated_at=created,
    )
    s.add(row)
    return row
