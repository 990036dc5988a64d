"""The notification outbox: rows written in the same transaction as what they announce.

Nothing here sends mail. A mailer drains `pending()` in its own transaction, sends each row, and
calls `mark_sent`; a row sent twice after a crash is possible, a row lost is not.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy.orm import Session

from cardhour.db.models import NotificationRow
from cardhour.store.accounts import notifications as store

MAX_LIST = 200


def notify(
    session: Session, user_ids: Iterable[str], subject: str, body: str, now: datetime
) -> list[NotificationRow]:
    """One outbox row per distinct user, unsent."""
    rows = [
        NotificationRow(user_id=u, subject=subject[:300], body=body, created_at=now)
        for u in dict.fromkeys(user_ids)
    ]
    store.add_notifications(session, rows)
    return rows


def list_for(session: Session, user_id: str, limit: int = 50) -> list[NotificationRow]:
    """The user's own notifications, newest first (at most `MAX_LIST`)."""
    return store.notifications_of(session, user_id, max(1, min(limit, MAX_LIST)))


def pending(session: Session, limit: int = 100) -> list[NotificationRow]:
    """Unsent rows, oldest first, for a mailer."""
    return store.unsent_notifications(session, limit)


def mark_sent(session: Session, rows: Iterable[NotificationRow], now: datetime) -> None:
    for row in rows:
        row.sent_at = now
    session.flush()
