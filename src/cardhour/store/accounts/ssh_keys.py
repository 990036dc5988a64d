"""SSH public keys per account."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cardhour.db.models import SshKeyRow


def list_owned(session: Session, owner_id: str) -> list[SshKeyRow]:
    stmt = select(SshKeyRow).where(SshKeyRow.owner_id == owner_id)
    return list(session.scalars(stmt.order_by(SshKeyRow.created_at, SshKeyRow.name)))


def public_keys_of(session: Session, owner_id: str) -> list[str]:
    """`list_owned`'s public keys, in the same order (no ORM objects)."""
    stmt = select(SshKeyRow.public_key).where(SshKeyRow.owner_id == owner_id)
    return list(session.scalars(stmt.order_by(SshKeyRow.created_at, SshKeyRow.name)))


def count_owned(session: Session, owner_id: str) -> int:
    stmt = select(func.count()).select_from(SshKeyRow).where(SshKeyRow.owner_id == owner_id)
    return session.execute(stmt).scalar_one()


def find_owned(session: Session, owner_id: str, ident: str) -> SshKeyRow | None:
    """The owner's key whose id, name or fingerprint is `ident`; None for anyone else's."""
    stmt = select(SshKeyRow).where(SshKeyRow.owner_id == owner_id)
    for column in (SshKeyRow.id, SshKeyRow.name, SshKeyRow.fingerprint):
        row = session.scalars(stmt.where(column == ident)).first()
        if row is not None:
            return row
    return None


def add(session: Session, row: SshKeyRow) -> SshKeyRow:
    session.add(row)
    session.flush()
    return row


def delete(session: Session, row: SshKeyRow) -> None:
    session.delete(row)
    session.flush()
