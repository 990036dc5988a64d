"""Developers' payouts."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cardhour.db.locking import for_update
from cardhour.db.models import PayoutRow

PAID = "paid"  # `PayoutRow.status` once the operator paid it


def add_payout(session: Session, row: PayoutRow) -> None:
    """Added to the session; the caller's flush inserts it."""
    session.add(row)


def get_payout_for_update(session: Session, payout_id: str) -> PayoutRow | None:
    return session.scalars(for_update(select(PayoutRow).where(PayoutRow.id == payout_id))).first()


def list_payouts_of(session: Session, developer_id: str) -> list[PayoutRow]:
    """The developer's payouts, oldest request first (ties by id)."""
    stmt = select(PayoutRow).where(PayoutRow.developer_id == developer_id)
    return list(session.scalars(stmt.order_by(PayoutRow.requested_at, PayoutRow.id)))


def paid_total(session: Session, developer_id: str) -> int:
    """What the developer's paid payouts add up to."""
    stmt = select(func.coalesce(func.sum(PayoutRow.amount_micros), 0)).where(
        PayoutRow.developer_id == developer_id, PayoutRow.status == PAID
    )
    return int(session.scalar(stmt) or 0)
