"""Volumes by owner, by instance, by state."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from cardhour.core.storage.volumes import ATTACHED, AVAILABLE, DELETED, DELETING, KEPT, VOLUME
from cardhour.db.models import VolumeEventRow, VolumeRow


def add(session: Session, row: VolumeRow) -> VolumeRow:
    session.add(row)
    session.flush()
    return row


def list_owned(session: Session, owner_id: str, include_deleted: bool = False) -> list[VolumeRow]:
    """The owner's volumes (not the kept disks of stopped instances)."""
    stmt = select(VolumeRow).where(VolumeRow.owner_id == owner_id, VolumeRow.kind == VOLUME)
    if not include_deleted:
        stmt = stmt.where(VolumeRow.state != DELETED)
    return list(session.scalars(stmt.order_by(VolumeRow.created_at, VolumeRow.name)))


def find_owned(session: Session, owner_id: str, ident: str, lock: bool = False) -> VolumeRow | None:
    """The owner's live (not deleted) volume whose id or name is `ident`."""
    stmt = select(VolumeRow).where(
        VolumeRow.owner_id == owner_id, VolumeRow.state != DELETED, VolumeRow.kind == VOLUME
    )
    stmt = _locked(stmt, lock)
    for column in (VolumeRow.id, VolumeRow.name):
        row = session.scalars(stmt.where(column == ident)).first()
        if row is not None:
            return row
    return None


def name_taken(session: Session, owner_id: str, name: str) -> bool:
    stmt = select(VolumeRow.id).where(
        VolumeRow.owner_id == owner_id,
        VolumeRow.name == name,
        VolumeRow.state != DELETED,
        VolumeRow.kind == VOLUME,
    )
    return session.scalars(stmt).first() is not None


def attached_to(session: Session, instance_id: str, lock: bool = False) -> list[VolumeRow]:
    """The volumes attached to the instance, in id order (the lock order)."""
    stmt = select(VolumeRow).where(
        VolumeRow.instance_id == instance_id, VolumeRow.state == ATTACHED
    )
    return list(session.scalars(_locked(stmt, lock).order_by(VolumeRow.id)))


def _locked(stmt: Select[VolumeRow], lock: bool) -> Select[VolumeRow]:
    """`stmt` locking its rows and reading them fresh (an unlocked read of this transaction
    may hold them already), when `lock`."""
    if not lock:
        return stmt
    return stmt.with_for_update().execution_options(populate_existing=True)


def get(session: Session, volume_id: str, lock: bool = False) -> VolumeRow | None:
    stmt = select(VolumeRow).where(VolumeRow.id == volume_id)
    return session.scalars(_locked(stmt, lock)).first()


def being_deleted(session: Session) -> list[VolumeRow]:
    stmt = select(VolumeRow).where(VolumeRow.state == DELETING)
    return list(session.scalars(stmt.order_by(VolumeRow.delete_requested_at)))


def lock(session: Session, ids: list[str]) -> list[VolumeRow]:
    """The volumes of `ids`, locked in id order (the lock order of volumes)."""
    if not ids:
        return []
    stmt = select(VolumeRow).where(VolumeRow.id.in_(ids)).order_by(VolumeRow.id)
    return list(session.scalars(_locked(stmt, True)))


def billable(session: Session, charged_before: datetime) -> list[VolumeRow]:
    """Volumes whose charge is due: not asked to go and charged up to before `charged_before`,
    or asked to go with time not charged."""
    stmt = select(VolumeRow).where(
        (VolumeRow.delete_requested_at.is_(None) & (VolumeRow.billed_until <= charged_before))
        | (VolumeRow.billed_until < VolumeRow.delete_requested_at)
    )
    return list(session.scalars(stmt.order_by(VolumeRow.id)))


def kept_between(
    session: Session, owner_id: str, start: datetime, end: datetime
) -> list[VolumeRow]:
    """The owner's volumes created before `end` whose charge did not end before `start`."""
    stmt = select(VolumeRow).where(
        VolumeRow.owner_id == owner_id,
        VolumeRow.created_at < end,
        VolumeRow.delete_requested_at.is_(None) | (VolumeRow.delete_requested_at > start),
    )
    return list(session.scalars(stmt.order_by(VolumeRow.id)))


def add_event(session: Session, row: VolumeEventRow) -> None:
    session.add(row)


def events_of(session: Session, volume_id: str) -> list[VolumeEventRow]:
    stmt = select(VolumeEventRow).where(VolumeEventRow.volume_id == volume_id)
    return list(session.scalars(stmt.order_by(VolumeEventRow.at, VolumeEventRow.id)))


def live_owners(session: Session) -> list[str]:
    """The owners of volumes that are not being deleted, and of kept disks."""
    stmt = select(VolumeRow.owner_id).where(VolumeRow.state.in_((AVAILABLE, ATTACHED, KEPT)))
    return sorted(set(session.scalars(stmt.distinct())))


def live_of(session: Session, owner_id: str, lock: bool = False) -> list[VolumeRow]:
    """The owner's volumes that are not being deleted and kept disks, in id order (the lock
    order)."""
    stmt = select(VolumeRow).where(
        VolumeRow.owner_id == owner_id, VolumeRow.state.in_((AVAILABLE, ATTACHED, KEPT))
    )
    return list(session.scalars(_locked(stmt, lock).order_by(VolumeRow.id)))


def kept_disks_of(session: Session, instance_id: str) -> list[VolumeRow]:
    """The instance's kept disks still billed (one at most), locked."""
    stmt = select(VolumeRow).where(VolumeRow.instance_id == instance_id, VolumeRow.state == KEPT)
    return list(session.scalars(_locked(stmt, True).order_by(VolumeRow.id)))


def of_instance(session: Session, instance_id: str, lock: bool = False) -> list[VolumeRow]:
    """The instance's attached volumes and kept disk, in id order (the lock order)."""
    stmt = select(VolumeRow).where(
        VolumeRow.instance_id == instance_id, VolumeRow.state.in_((ATTACHED, KEPT))
    )
    return list(session.scalars(_locked(stmt, lock).order_by(VolumeRow.id)))
