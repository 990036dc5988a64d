"""Paid app calls: the gateway's INSERT, the settlement's and maturation's claims, the sums a
caller's spendable cash and a developer's dashboard are made of."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import cast

from sqlalchemy import Executable, Table, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from cardhour.db.locking import for_claim, for_update
from cardhour.db.models import AppCallRow, LedgerAccountRow

OK, REFUNDED = "ok", "refunded"  # `AppCallRow.status`


@functools.cache
def record_statement(dialect: str) -> Executable:
    """One INSERT of a call (`services.marketplace.earnings.call_row` gives its parameters) that
    does nothing when the caller's call key is already recorded (the unique key makes a call
    idempotent; no transaction of its own is needed); returns the id inserted, or no row. Built
    once per dialect: a statement rebuilt per call costs more than the round trip."""
    insert = sqlite_insert if dialect == "sqlite" else pg_insert
    table = cast(Table, AppCallRow.__table__)
    return (
        insert(table)
        .on_conflict_do_nothing(index_elements=["caller_id", "call_key"])
        .returning(table.c.id)
    )


def insert_call(session: Session, row: dict[str, object]) -> str | None:
    """`record_statement` in the session: the id inserted, or None when the key was recorded."""
    stmt = record_statement(session.get_bind().dialect.name)
    return session.execute(stmt, row).scalar()


def call_exists(session: Session, call_id: str) -> bool:
    return session.scalar(select(AppCallRow.id).where(AppCallRow.id == call_id)) is not None


def get_call_by_key(session: Session, caller_id: str, call_key: str) -> AppCallRow | None:
    stmt = select(AppCallRow).where(
        AppCallRow.caller_id == caller_id, AppCallRow.call_key == call_key
    )
    return session.scalars(stmt).first()


def get_call_for_update(session: Session, call_id: str) -> AppCallRow | None:
    return session.scalars(for_update(select(AppCallRow).where(AppCallRow.id == call_id))).first()


def claim_unsettled(
    session: Session, call_ids: Sequence[str] | None, limit: int
) -> list[AppCallRow]:
    """Successful calls not posted yet (all, or those of `call_ids`), oldest first, up to
    `limit`, claimed: a concurrent settlement skips them."""
    stmt = select(AppCallRow).where(AppCallRow.settled_at.is_(None), AppCallRow.status == OK)
    if call_ids is not None:
        stmt = stmt.where(AppCallRow.id.in_(list(call_ids)))
    return list(session.scalars(for_claim(stmt.order_by(AppCallRow.at).limit(limit))))


def claim_maturing(session: Session, now: datetime, limit: int) -> list[AppCallRow]:
    """Settled, successful calls whose `matures_at` has come and that have not matured, by id,
    up to `limit`, claimed."""
    stmt = (
        select(AppCallRow)
        .where(
            AppCallRow.status == OK,
            AppCallRow.matured_at.is_(None),
            AppCallRow.matures_at <= now,
            AppCallRow.settled_at.is_not(None),
        )
        .order_by(AppCallRow.id)
        .limit(limit)
    )
    return list(session.scalars(for_claim(stmt)))


def spendable(session: Session, caller_id: str, cash_key: str) -> int:
    """The posted balance of ledger account `cash_key` less the price of the caller's calls
    recorded but not settled, in one statement (one snapshot even outside a transaction)."""
    cash = (
        select(LedgerAccountRow.credits_posted - LedgerAccountRow.debits_posted)
        .where(LedgerAccountRow.key == cash_key)
        .scalar_subquery()
    )
    owed = (
        select(func.sum(AppCallRow.price_micros))
        .where(
            AppCallRow.caller_id == caller_id,
            AppCallRow.settled_at.is_(None),
            AppCallRow.status == OK,
        )
        .scalar_subquery()
    )
    return int(session.scalar(select(func.coalesce(cash, 0) - func.coalesce(owed, 0))) or 0)


def totals_by_status(session: Session, developer_id: str) -> dict[str, tuple[int, int, int]]:
    """Per call status of the developer's calls: (calls, their prices, the developer's shares)."""
    rows = session.execute(
        select(
            AppCallRow.status,
            func.count(),
            func.coalesce(func.sum(AppCallRow.price_micros), 0),
            func.coalesce(func.sum(AppCallRow.developer_micros), 0),
        )
        .where(AppCallRow.developer_id == developer_id)
        .group_by(AppCallRow.status)
    ).all()
    return {status: (int(n), int(gross), int(share)) for status, n, gross, share in rows}


def unsettled_share(session: Session, developer_id: str) -> int:
    """The developer's shares of successful calls not posted yet."""
    stmt = select(func.coalesce(func.sum(AppCallRow.developer_micros), 0)).where(
        AppCallRow.developer_id == developer_id,
        AppCallRow.settled_at.is_(None),
        AppCallRow.status == OK,
    )
    return int(session.scalar(stmt) or 0)
