"""Ledger accounts and transfers. Balances move only through `insert_transfers` + `add_totals`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import ColumnElement, RowMapping, Table, and_, func, insert, or_, select
from sqlalchemy.orm import Session, aliased

from cardhour.db import bulk
from cardhour.db.locking import for_update
from cardhour.db.models import GrantMemberRow, GrantRow, LedgerAccountRow, LedgerTransferRow


def get_account(session: Session, key: str) -> LedgerAccountRow | None:
    return session.scalars(select(LedgerAccountRow).where(LedgerAccountRow.key == key)).first()


def lock_accounts(
    session: Session, keys: Sequence[str] = (), owners: Iterable[str] = (), holds: bool = True
) -> list[RowMapping]:
    """Lock the accounts named by `keys` plus every account owned by `owners`, in key order (the
    one lock order of the whole code base), and return their columns fresh from the database
    (plain rows, not ORM objects: the metering pass locks thousands). `holds=False`: of the
    owners' accounts, not the hold accounts (one per instance they ever launched; name the ones
    needed in `keys`)."""
    owners = sorted(set(owners))
    clauses: list[ColumnElement[bool]] = []
    if keys:
        clauses.append(LedgerAccountRow.key.in_(sorted(set(keys))))
    if owners:
        owned = LedgerAccountRow.owner_id.in_(owners)
        clauses.append(owned if holds else and_(owned, LedgerAccountRow.kind != "hold"))
    if not clauses:
        return []
    table = cast(Table, LedgerAccountRow.__table__)
    stmt = select(table).where(or_(*clauses)).order_by(table.c.key)
    return list(session.execute(for_update(stmt)).mappings().all())


def add_account(session: Session, row: LedgerAccountRow) -> LedgerAccountRow:
    session.add(row)
    session.flush()
    return row


def insert_account(session: Session, values: dict[str, Any]) -> None:
    """One new account by a Core INSERT (no look-up, no ORM object): for a key that cannot
    exist yet, such as a hold account of an instance created in this transaction."""
    session.execute(insert(cast(Table, LedgerAccountRow.__table__)).values(**values))


def get_transfer(session: Session, transfer_id: str) -> LedgerTransferRow | None:
    return session.get(LedgerTransferRow, transfer_id)


def insert_transfers(session: Session, rows: list[dict[str, Any]]) -> None:
    """Few multi-row INSERTs; a repeated id violates the primary key and aborts the transaction."""
    bulk.insert_rows(session, cast(Table, LedgerTransferRow.__table__), rows)


def add_totals(session: Session, deltas: dict[int, tuple[int, int]]) -> None:
    """Move cached totals by (debits, credits) per account id, as in-database increments."""
    rows = [
        {"id": aid, "debits_posted": d, "credits_posted": c}
        for aid, (d, c) in sorted(deltas.items())
    ]
    bulk.update_rows(
        session,
        cast(Table, LedgerAccountRow.__table__),
        "id",
        rows,
        increment=("debits_posted", "credits_posted"),
    )
    # the bulk UPDATE bypassed the ORM: an account object this session already holds is stale
    for obj in list(session.identity_map.values()):
        if isinstance(obj, LedgerAccountRow) and obj.id in deltas:
            session.expire(obj, ["debits_posted", "credits_posted"])


def hold_fundings(session: Session, hold_id: int) -> list[tuple[str, int, int]]:
    """(transfer id, source account id, amount) of every transfer of kind `hold` into a hold."""
    t = LedgerTransferRow
    stmt = select(t.id, t.debit_account_id, t.amount).where(
        t.credit_account_id == hold_id, t.kind == "hold"
    )
    return [(tid, source, amount) for tid, source, amount in session.execute(stmt)]


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


def cross_unit_transfers(session: Session, limit: int = 100) -> list[str]:
    """Ids of transfers whose two accounts, or the transfer itself, are in different units."""
    t, debit, credit = LedgerTransferRow, aliased(LedgerAccountRow), aliased(LedgerAccountRow)
    stmt = (
        select(t.id)
        .join(debit, debit.id == t.debit_account_id)
        .join(credit, credit.id == t.credit_account_id)
        .where(or_(debit.currency != credit.currency, t.currency != debit.currency))
        .limit(limit)
    )
    return list(session.scalars(stmt))


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


#: Above this many owners a lookup reads every active membership and filters in Python (the
#: metering pass asks for thousands of owners; grants are few).
_IN_LIST_LIMIT = 100


def active_grant_accounts(
    session: Session, owners: Sequence[str], now: datetime
) -> dict[str, list[str]]:
    """owner id -> keys of the grant-hours accounts the owner may spend from now (not expired;
    `valid_from` is checked where the account is used)."""
    stmt = (
        select(GrantMemberRow.user_id, GrantRow.account_key)
        .join(GrantRow, GrantRow.id == GrantMemberRow.grant_id)
        .where(GrantRow.expires_at > now)
    )
    wanted = set(owners)
    if len(wanted) <= _IN_LIST_LIMIT:
        stmt = stmt.where(GrantMemberRow.user_id.in_(sorted(wanted)))
    found: dict[str, list[str]] = {}
    for user_id, key in session.execute(stmt):
        if user_id in wanted:
            found.setdefault(user_id, []).append(key)
    return found
