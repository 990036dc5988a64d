"""Ledger accounts and transfers. Balances move only through `insert_transfers` + `add_totals`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, func, insert, or_, select, update
from sqlalchemy.orm import Session

from cardhour.db.locking import for_update
from cardhour.db.models import LedgerAccountRow, LedgerTransferRow


def get_account(session: Session, key: str) -> LedgerAccountRow | None:
    return session.scalars(select(LedgerAccountRow).where(LedgerAccountRow.key == key)).first()


def lock_accounts(
    session: Session, keys: Sequence[str] = (), owners: Iterable[str] = ()
) -> dict[str, LedgerAccountRow]:
    """Lock the accounts named by `keys` plus every account owned by `owners`, in key order (the
    one lock order of the whole code base), and return them fresh from the database."""
    owners = sorted(set(owners))
    clauses = []
    if keys:
        clauses.append(LedgerAccountRow.key.in_(sorted(set(keys))))
    if owners:
        clauses.append(LedgerAccountRow.owner_id.in_(owners))
    if not clauses:
        return {}
    stmt = (
        select(LedgerAccountRow)
        .where(or_(*clauses))
        .order_by(LedgerAccountRow.key)
        .execution_options(populate_existing=True)
    )
    return {row.key: row for row in session.scalars(for_update(stmt))}


def add_account(session: Session, row: LedgerAccountRow) -> LedgerAccountRow:
    session.add(row)
    session.flush()
    return row


def get_transfer(session: Session, transfer_id: str) -> LedgerTransferRow | None:
    return session.get(LedgerTransferRow, transfer_id)


def insert_transfers(session: Session, rows: list[dict[str, Any]]) -> None:
    """One multi-row INSERT; a repeated id violates the primary key and aborts the transaction."""
    if rows:
        session.execute(insert(LedgerTransferRow), rows)


def add_totals(session: Session, deltas: dict[int, tuple[int, int]]) -> None:
    """Move cached totals by (debits, credits) per account id, as in-database increments."""
    if not deltas:
        return
    table = cast(Table, LedgerAccountRow.__table__)
    stmt = (
        update(table)
        .where(table.c.id == bindparam("aid"))
        .values(
            debits_posted=table.c.debits_posted + bindparam("d"),
            credits_posted=table.c.credits_posted + bindparam("c"),
        )
    )
    params = [{"aid": aid, "d": d, "c": c} for aid, (d, c) in sorted(deltas.items())]
    session.connection().execute(stmt, params)


def net_flows(session: Session, account_id: int) -> dict[int, int]:
    """For one account: per counterpart account, what it received from it minus what it sent."""
    t = LedgerTransferRow
    flows: dict[int, int] = {}
    received = select(t.debit_account_id, func.sum(t.amount)).where(
        t.credit_account_id == account_id
    )
    for other, amount in session.execute(received.group_by(t.debit_account_id)):
        flows[other] = flows.get(other, 0) + int(amount)
    sent = select(t.credit_account_id, func.sum(t.amount)).where(t.debit_account_id == account_id)
    for other, amount in session.execute(sent.group_by(t.credit_account_id)):
        flows[other] = flows.get(other, 0) - int(amount)
    return flows


def expired_with_balance(session: Session, now: datetime) -> list[LedgerAccountRow]:
    a = LedgerAccountRow
    stmt = select(a).where(
        a.expires_at.is_not(None), a.expires_at <= now, a.credits_posted > a.debits_posted
    )
    return list(session.scalars(stmt))


def list_accounts(session: Session) -> list[LedgerAccountRow]:
    return list(session.scalars(select(LedgerAccountRow).order_by(LedgerAccountRow.id)))


def owned_accounts(session: Session, owner_id: str) -> list[LedgerAccountRow]:
    stmt = select(LedgerAccountRow).where(LedgerAccountRow.owner_id == owner_id)
    return list(session.scalars(stmt.order_by(LedgerAccountRow.key)))


def transfer_sums(session: Session) -> tuple[int, dict[int, int], dict[int, int], list[str]]:
    """(count, debits per account, credits per account, ids of non-positive transfers)."""
    t = LedgerTransferRow
    debits = {
        aid: int(s)
        for aid, s in session.execute(
            select(t.debit_account_id, func.sum(t.amount)).group_by(t.debit_account_id)
        )
    }
    credits = {
        aid: int(s)
        for aid, s in session.execute(
            select(t.credit_account_id, func.sum(t.amount)).group_by(t.credit_account_id)
        )
    }
    count = session.scalar(select(func.count()).select_from(t)) or 0
    bad = list(session.scalars(select(t.id).where(t.amount <= 0).limit(100)))
    return count, debits, credits, bad


def list_transfers_between(
    session: Session, account_ids: Sequence[int], start: datetime, end: datetime
) -> list[LedgerTransferRow]:
    t = LedgerTransferRow
    stmt = select(t).where(
        or_(t.debit_account_id.in_(account_ids), t.credit_account_id.in_(account_ids)),
        t.created_at >= start,
        t.created_at < end,
    )
    return list(session.scalars(stmt.order_by(t.created_at, t.id)))
