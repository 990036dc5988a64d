"""Reads for monthly statements: usage segments, running instances, balances at a moment, and
the history of hold accounts. Read-only; nothing here locks or writes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from cardhour.db.models import InstanceRow, LedgerTransferRow, UsageSegmentRow


def segments_started_between(
    session: Session, owner_id: str, start: datetime, end: datetime
) -> list[UsageSegmentRow]:
    """The owner's finished segments with `start <= started_at < end`, oldest first."""
    s = UsageSegmentRow
    stmt = select(s).where(s.owner_id == owner_id, s.started_at >= start, s.started_at < end)
    return list(session.scalars(stmt.order_by(s.started_at, s.id)))


def metered_instances(session: Session, owner_id: str) -> list[InstanceRow]:
    """The owner's instances with an open segment (`running_since` set)."""
    i = InstanceRow
    stmt = select(i).where(i.owner_id == owner_id, i.running_since.is_not(None))
    return list(session.scalars(stmt.order_by(i.created_at, i.id)))


def instances_by_id(session: Session, owner_id: str, ids: Sequence[str]) -> dict[str, InstanceRow]:
    """The owner's instances among `ids` (another owner's ids are left out)."""
    if not ids:
        return {}
    i = InstanceRow
    stmt = select(i).where(i.owner_id == owner_id, i.id.in_(sorted(set(ids))))
    return {row.id: row for row in session.scalars(stmt)}


def grant_payments(
    session: Session, owner_id: str, start: datetime, end: datetime
) -> dict[str, int]:
    """unit -> amount of the `grant_use` transfers for the owner's instances posted in
    [start, end): the money grants paid (the currency) and the card time it took (`MGS`)."""
    t, i = LedgerTransferRow, InstanceRow
    stmt = (
        select(t.currency, func.sum(t.amount))
        .join(i, i.id == t.ref)
        .where(
            t.kind == "grant_use",
            i.owner_id == owner_id,
            t.created_at >= start,
            t.created_at < end,
        )
        .group_by(t.currency)
    )
    return {unit: int(amount) for unit, amount in session.execute(stmt)}


def balances_before(session: Session, account_ids: Sequence[int], when: datetime) -> dict[int, int]:
    """Per account, credits − debits of the transfers posted before `when` (0 when none)."""
    if not account_ids:
        return {}
    t = LedgerTransferRow
    ids = sorted(set(account_ids))
    out = dict.fromkeys(ids, 0)
    credited = (
        select(t.credit_account_id, func.sum(t.amount))
        .where(t.credit_account_id.in_(ids), t.created_at < when)
        .group_by(t.credit_account_id)
    )
    for aid, amount in session.execute(credited):
        out[aid] += int(amount)
    debited = (
        select(t.debit_account_id, func.sum(t.amount))
        .where(t.debit_account_id.in_(ids), t.created_at < when)
        .group_by(t.debit_account_id)
    )
    for aid, amount in session.execute(debited):
        out[aid] -= int(amount)
    return out


def transfers_before(
    session: Session, account_ids: Sequence[int], end: datetime
) -> list[LedgerTransferRow]:
    """Every transfer touching `account_ids` posted before `end`, by time then id."""
    if not account_ids:
        return []
    t = LedgerTransferRow
    ids = sorted(set(account_ids))
    stmt = select(t).where(
        or_(t.debit_account_id.in_(ids), t.credit_account_id.in_(ids)), t.created_at < end
    )
    return list(session.scalars(stmt.order_by(t.created_at, t.id)))
