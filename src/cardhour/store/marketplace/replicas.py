"""App replicas' shares of the fleet (`app_replicas`)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from cardhour.db.models import AppReplicaRow


def add_replica(session: Session, row: AppReplicaRow) -> None:
    session.add(row)
    session.flush()


def delete_replica(session: Session, replica_id: str) -> None:
    """Deleting one already gone does nothing."""
    session.execute(delete(AppReplicaRow).where(AppReplicaRow.id == replica_id))


def mark_seen(
    session: Session, runtime_id: str, replica_ids: Collection[str], now: datetime
) -> None:
    """The runtime's replicas of `replica_ids` were seen at `now` (others' are left alone)."""
    session.execute(
        update(AppReplicaRow)
        .where(AppReplicaRow.runtime_id == runtime_id, AppReplicaRow.id.in_(list(replica_ids)))
        .values(seen_at=now)
    )


def replica_ids_of(session: Session, runtime_id: str) -> set[str]:
    stmt = select(AppReplicaRow.id).where(AppReplicaRow.runtime_id == runtime_id)
    return set(session.scalars(stmt))


def delete_unseen(session: Session, before: datetime) -> int:
    """Delete the shares last seen before `before`; how many."""
    result = session.execute(delete(AppReplicaRow).where(AppReplicaRow.seen_at < before))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
