"""Instances and their events."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, case, insert, or_, select
from sqlalchemy.orm import Session

from cardhour.db.locking import for_claim, for_update
from cardhour.db.models import InstanceEventRow, InstanceRow
from cardhour.store.billing.usage import Rated

_IDENT = re.compile(r"[A-Za-z0-9-]{1,64}")


def get_instance(session: Session, instance_id: str, lock: bool = False) -> InstanceRow | None:
    """`lock`: fresh from the DB and locked until the transaction ends (PostgreSQL)."""
    stmt = select(InstanceRow).where(InstanceRow.id == instance_id)
    if lock:
        stmt = for_update(stmt).execution_options(populate_existing=True)
    return session.scalars(stmt).first()


def get_owned(
    session: Session, owner_id: str, id_or_name: str, lock: bool = False
) -> InstanceRow | None:
    """By id or by name among the owner's non-terminated instances; None for anyone else's
    (and for anything that cannot be an id or a name)."""
    if not _IDENT.fullmatch(id_or_name):
        return None
    stmt = select(InstanceRow).where(InstanceRow.owner_id == owner_id)
    if lock:
        stmt = for_update(stmt).execution_options(populate_existing=True)
    row = session.scalars(stmt.where(InstanceRow.id == id_or_name)).first()
    if row is not None:
        return row
    by_name = stmt.where(InstanceRow.name == id_or_name, InstanceRow.status != "terminated")
    return session.scalars(by_name.order_by(InstanceRow.created_at.desc())).first()


def list_owned(
    session: Session, owner_id: str, include_terminated: bool = False
) -> list[InstanceRow]:
    stmt = select(InstanceRow).where(InstanceRow.owner_id == owner_id)
    if not include_terminated:
        stmt = stmt.where(InstanceRow.status != "terminated")
    return list(session.scalars(stmt.order_by(InstanceRow.created_at, InstanceRow.id)))


def list_in_status(
    session: Session, statuses: Iterable[str], lock: bool = False
) -> list[InstanceRow]:
    stmt = select(InstanceRow).where(InstanceRow.status.in_(list(statuses)))
    if lock:
        stmt = for_update(stmt).execution_options(populate_existing=True)
    return list(session.scalars(stmt.order_by(InstanceRow.created_at, InstanceRow.id)))


def running_workloads(session: Session) -> list[tuple[str, str]]:
    """(instance id, external name) of every running instance."""
    stmt = select(InstanceRow.id, InstanceRow.external_name).where(
        InstanceRow.status == "running", InstanceRow.external_name.is_not(None)
    )
    return [(i, str(n)) for i, n in session.execute(stmt.order_by(InstanceRow.id))]


def lock_many(session: Session, ids: Iterable[str]) -> dict[str, InstanceRow]:
    """The instances of `ids` as ORM objects, fresh from the database and locked."""
    stmt = for_update(
        select(InstanceRow).where(InstanceRow.id.in_(sorted(ids))).order_by(InstanceRow.id)
    )
    return {row.id: row for row in session.scalars(stmt.execution_options(populate_existing=True))}


def recent_requests(session: Session, limit: int) -> list[tuple[str, int]]:
    """(gpu_model, gpu_count) of the `limit` most recently created instances, any status."""
    stmt = (
        select(InstanceRow.gpu_model, InstanceRow.gpu_count)
        .order_by(InstanceRow.created_at.desc(), InstanceRow.id.desc())
        .limit(limit)
    )
    return [(model, count) for model, count in session.execute(stmt)]


def claimable(
    session: Session, statuses: Iterable[str], now: datetime, limit: int
) -> list[InstanceRow]:
    """Rows in `statuses` whose lease is free or expired, locked against other workers.

    Order: `stopping` first (it frees GPUs and stops nothing from being billed), then rows never
    claimed, then the longest released, so slow work cannot starve the rest.
    """
    stmt = (
        select(InstanceRow)
        .where(InstanceRow.status.in_(list(statuses)))
        .where(or_(InstanceRow.lease_expires_at.is_(None), InstanceRow.lease_expires_at <= now))
        .order_by(
            case((InstanceRow.status == "stopping", 0), else_=1),
            InstanceRow.lease_expires_at.asc().nulls_first(),
            InstanceRow.id,
        )
        .limit(limit)
    )
    return list(session.scalars(for_claim(stmt)))


def add_instance(session: Session, row: InstanceRow) -> InstanceRow:
    session.add(row)
    session.flush()
    return row


def add_event(session: Session, event: InstanceEventRow) -> None:
    session.add(event)
    session.flush()


def insert_event(session: Session, values: dict[str, Any]) -> None:
    """One event by a Core INSERT (no ORM object to flush): a launch's `created` event."""
    session.execute(insert(cast(Table, InstanceEventRow.__table__)).values(**values))


def note(session: Session, row: Rated, now: datetime, reason: str) -> None:
    """An event that records something about the instance without changing its state."""
    add_event(
        session,
        InstanceEventRow(
            instance_id=row.id, at=now, from_status=row.status, to_status=row.status, reason=reason
        ),
    )


def list_events(session: Session, instance_id: str) -> list[InstanceEventRow]:
    stmt = select(InstanceEventRow).where(InstanceEventRow.instance_id == instance_id)
    return list(session.scalars(stmt.order_by(InstanceEventRow.id)))


def name_taken(session: Session, owner_id: str, name: str) -> bool:
    stmt = select(InstanceRow.id).where(
        InstanceRow.owner_id == owner_id,
        InstanceRow.name == name,
        InstanceRow.status != "terminated",
    )
    return session.scalars(stmt).first() is not None


def bare_metal_ids(session: Session) -> set[str]:
    """Bare-metal instances that may hold nodes (their nodes are held exclusively)."""
    stmt = select(InstanceRow.id).where(
        InstanceRow.bare_metal.is_(True),
        InstanceRow.status.in_(("provisioning", "running", "stopping")),
    )
    return set(session.scalars(stmt))


def has_run(session: Session, instance_id: str) -> bool:
    """Whether the instance was ever `running` (a quote's price cap holds until it first is)."""
    stmt = select(InstanceEventRow.id).where(
        InstanceEventRow.instance_id == instance_id, InstanceEventRow.to_status == "running"
    )
    return session.scalars(stmt.limit(1)).first() is not None


def with_disk_to_settle(session: Session) -> list[tuple[str, str | None, str]]:
    """(id, external name, status) of running and terminated instances still naming the host
    a stop kept their disk on (an index on `disk_host`: few rows)."""
    stmt = select(InstanceRow.id, InstanceRow.external_name, InstanceRow.status).where(
        InstanceRow.disk_host.is_not(None),
        InstanceRow.status.in_(("running", "terminated")),
    )
    return [(i, e, st) for i, e, st in session.execute(stmt).all()]
