"""Ledger accounts and transfers. Balances move only through `apply_transfer`."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from cardhour.db.locking import for_update
from cardhour.db.models import LedgerAccountRow, LedgerTransferRow


def get_account(session: Session, key: str) -> LedgerAccountRow | None:
    return session.scalars(select(LedgerAccountRow).where(LedgerAccountRow.key == key)).first()


def lock_accounts(session: Session, keys: Sequence[str]) -> dict[str, LedgerAccountRow]:
    """Lock the accounts (in key order, to avoid deadlocks) and return them fresh from the DB."""
    stmt = (
        select(LedgerAccountRow)
        .where(LedgerAccountRow.key.in_(sorted(keys)))
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


def apply_transfer(session: Session, transfer: LedgerTransferRow) -> None:
    """Insert the transfer and move both balances in the same flush (atomic in-DB increments)."""
    session.add(transfer)
    session.flush()
    session.execute(
        update(LedgerAccountRow)
        .where(LedgerAccountRow.id == transfer.debit_account_id)
        .values(debits_posted=LedgerAccountRow.debits_posted + transfer.amount)
    )
    session.execute(
        update(LedgerAccountRow)
        .where(LedgerAccountRow.id == transfer.credit_account_id)
        .values(credits_posted=LedgerAccountRow.credits_posted + transfer.amount)
    )


def list_accounts(session: Session) -> list[LedgerAccountRow]:
    return list(session.scalars(select(LedgerAccountRow).order_by(LedgerAccountRow.id)))


def list_transfers(session: Session) -> list[LedgerTransferRow]:
    return list(session.scalars(select(LedgerTransferRow)))
