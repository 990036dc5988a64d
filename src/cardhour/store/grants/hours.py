"""Grants of card-hours, their members, and what was spent from them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from cardhour.db.models import (
    GrantMemberRow,
    GrantRow,
    InstanceRow,
    LedgerAccountRow,
    LedgerTransferRow,
)


def get(session: Session, grant_id: str) -> GrantRow | None:
    return session.get(GrantRow, grant_id)


def add(session: Session, row: GrantRow, member_ids: Sequence[str]) -> GrantRow:
    session.add(row)
    session.flush()
    session.add_all(GrantMemberRow(grant_id=row.id, user_id=u) for u in sorted(set(member_ids)))
    session.flush()
    return row


def member_ids(session: Session, grant_id: str) -> list[str]:
    stmt = select(GrantMemberRow.user_id).where(GrantMemberRow.grant_id == grant_id)
    return sorted(session.scalars(stmt))


def of_member(session: Session, user_id: str) -> list[GrantRow]:
    stmt = (
        select(GrantRow)
        .join(GrantMemberRow, GrantMemberRow.grant_id == GrantRow.id)
        .where(GrantMemberRow.user_id == user_id)
        .order_by(GrantRow.created_at, GrantRow.id)
    )
    return list(session.scalars(stmt))


def list_all(session: Session) -> list[GrantRow]:
    return list(session.scalars(select(GrantRow).order_by(GrantRow.created_at, GrantRow.id)))


def spending(session: Session, account_id: int) -> list[tuple[str, str, str, str, int, datetime]]:
    """(kind, instance id, instance name, owner id, amount, at) of every transfer out of a
    grant-hours account (use and expiry), oldest first."""
    t, i = LedgerTransferRow, InstanceRow
    stmt = (
        select(t.kind, t.ref, i.name, i.owner_id, t.amount, t.created_at)
        .outerjoin(i, i.id == t.ref)
        .where(t.debit_account_id == account_id)
        .order_by(t.created_at, t.id)
    )
    return [
        (kind, ref or "", name or "", owner or "", int(amount), at)
        for kind, ref, name, owner, amount, at in session.execute(stmt)
    ]


def account(session: Session, key: str) -> LedgerAccountRow | None:
    return session.scalars(select(LedgerAccountRow).where(LedgerAccountRow.key == key)).first()
