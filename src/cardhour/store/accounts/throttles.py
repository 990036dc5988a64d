"""Sign-in and sign-up throttles and the events of their locks. Flush, never commit."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cardhour.db.locking import for_update
from cardhour.db.models import AuthEventRow, AuthThrottleRow


def get(session: Session, keys: list[str]) -> list[AuthThrottleRow]:
    """The throttles of `keys` that exist, unlocked (a read for the check before an attempt)."""
    stmt = select(AuthThrottleRow).where(AuthThrottleRow.key.in_(sorted(keys)))
    return list(session.scalars(stmt))


def lock(session: Session, keys: list[str], now: datetime) -> list[AuthThrottleRow]:
    """The throttles of `keys`, made when missing, locked in key order until the transaction
    ends (concurrent failures of one key count one after the other)."""
    for key in sorted(keys):
        exists = select(AuthThrottleRow.key).where(AuthThrottleRow.key == key)
        if session.scalar(exists) is None:  # a column: no unlocked row in the session
            try:
                with session.begin_nested():
                    session.add(AuthThrottleRow(key=key, failures=0, window_start=now, strikes=0,
                                                updated_at=now))  # fmt: skip
            except IntegrityError:  # made by a concurrent failure: counted on it
                pass
    stmt = for_update(select(AuthThrottleRow).where(AuthThrottleRow.key.in_(sorted(keys))))
    stmt = stmt.order_by(AuthThrottleRow.key).execution_options(populate_existing=True)
    return list(session.scalars(stmt))


def clear(session: Session, key: str) -> None:
    session.execute(delete(AuthThrottleRow).where(AuthThrottleRow.key == key))


def forget_before(session: Session, before: datetime) -> int:
    """Remove throttles untouched since `before` whose lock is over (housekeeping)."""
    stmt = delete(AuthThrottleRow).where(
        AuthThrottleRow.updated_at < before,
        (AuthThrottleRow.locked_until.is_(None)) | (AuthThrottleRow.locked_until < before),
    )
    return int(session.execute(stmt).rowcount or 0)  # type: ignore[attr-defined]


def add_event(session: Session, row: AuthEventRow) -> None:
    session.add(row)
    session.flush()


def events(session: Session, limit: int) -> list[AuthEventRow]:
    """The latest `limit` events, newest first."""
    stmt = select(AuthEventRow).order_by(AuthEventRow.at.desc(), AuthEventRow.id.desc())
    return list(session.scalars(stmt.limit(limit)))
