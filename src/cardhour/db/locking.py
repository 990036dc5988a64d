"""Row claims and the leader lock, per dialect."""

from __future__ import annotations

import zlib
from typing import Any

from sqlalchemy import Select, text
from sqlalchemy.orm import Session


def is_postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def for_update(stmt: Select[Any], skip_locked: bool = False) -> Select[Any]:
    """Lock selected rows on PostgreSQL (SQLite's BEGIN IMMEDIATE already serialises writers)."""
    return stmt.with_for_update(skip_locked=skip_locked)


def for_claim(stmt: Select[Any]) -> Select[Any]:
    """`FOR NO KEY UPDATE SKIP LOCKED` on PostgreSQL: claim rows other workers are not holding."""
    return stmt.with_for_update(skip_locked=True, key_share=True)


def try_leader_lock(session: Session, name: str) -> bool:
    """Become the leader for `name` until this transaction ends. Always true on SQLite."""
    if not is_postgres(session):
        return True
    key = zlib.crc32(name.encode())
    return bool(session.execute(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": key}).scalar())
