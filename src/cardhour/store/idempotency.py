"""Stored responses of requests sent with `Idempotency-Key` (docs/dev/payments.md). Flush only."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from cardhour.db.models import IdempotencyKeyRow


def get_key(session: Session, user_id: str, key: str) -> IdempotencyKeyRow | None:
    """The row for (`user_id`, `key`), read fresh from the database (never the identity map)."""
    stmt = (
        select(IdempotencyKeyRow)
        .where(IdempotencyKeyRow.user_id == user_id, IdempotencyKeyRow.key == key)
        .execution_options(populate_existing=True)
    )
    return session.scalars(stmt).first()


def add_key(session: Session, row: IdempotencyKeyRow) -> IdempotencyKeyRow:
    """Insert and flush. On PostgreSQL a concurrent uncommitted insert of the same (user, key)
    makes this wait for that transaction; if it commits, this raises `IntegrityError`."""
    session.add(row)
    session.flush()
    return row


def delete_key(session: Session, row_id: int) -> None:
    """Delete by id with a plain DELETE: deleting a row another transaction already removed is a
    no-op, not an error (unlike `session.delete`)."""
    session.execute(delete(IdempotencyKeyRow).where(IdempotencyKeyRow.id == row_id))
    session.flush()
