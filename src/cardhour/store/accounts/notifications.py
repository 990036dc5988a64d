"""The notification outbox's rows. Flush, never commit."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from cardhour.db.models import NotificationRow


def add_notifications(session: Session, rows: list[NotificationRow]) -> None:
    session.add_all(rows)
    session.flush()


def notifications_of(session: Session, user_id: str, limit: int) -> list[NotificationRow]:
    stmt = (
        select(NotificationRow)
        .where(NotificationRow.user_id == user_id)
        .order_by(NotificationRow.created_at.desc(), NotificationRow.id.desc())
        .limit(limit)
    )
    return list(session.scalars(stmt))


def unsent_notifications(session: Session, limit: int) -> list[NotificationRow]:
    stmt = (
        select(NotificationRow)
        .where(NotificationRow.sent_at.is_(None))
        .order_by(NotificationRow.id)
        .limit(limit)
    )
    return list(session.scalars(stmt))
