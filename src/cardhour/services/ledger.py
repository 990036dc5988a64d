"""The double-entry ledger: accounts, idempotent transfers, balances, usage charges.

Conventions (docs/dev/billing.md):
- A user's accounts (`cash`, `trial_credit`) are what the platform owes the user: their balance is
  credits − debits. Platform accounts (`promotions`, `revenue`, `cash_in`) are the other side.
- Every transfer moves a positive amount from one account to another, and its id is its
  idempotency key: posting the same id again with the same parameters returns the first one,
  with different parameters it is refused.
- Lock order: accounts are locked in key order in one call (`platform:*` before `user:*`).
- Usage spends trial credit first, then cash. Cash may go below zero by what was used between the
  last charge and the auto-stop; credit accounts never go below zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from cardhour.core.errors import Conflict
from cardhour.core.money import Money
from cardhour.db.models import LedgerAccountRow, LedgerTransferRow
from cardhour.store import ledger as store

USER_KINDS = ("trial_credit", "cash")  # spending order
PLATFORM_KINDS = ("promotions", "revenue", "cash_in")


def user_key(user_id: str, kind: str) -> str:
    return f"user:{user_id}:{kind}"


def platform_key(kind: str) -> str:
    return f"platform:{kind}"


def balance_of(row: LedgerAccountRow) -> int:
    return row.credits_posted - row.debits_posted


def _ensure(session: Session, key: str, kind: str, currency: str, owner: str | None) -> None:
    if store.get_account(session, key) is None:
        store.add_account(
            session,
            LedgerAccountRow(
                key=key,
                owner_id=owner,
                kind=kind,
                currency=currency,
                debits_posted=0,
                credits_posted=0,
            ),
        )


def ensure_platform_accounts(session: Session, currency: str) -> None:
    for kind in PLATFORM_KINDS:
        _ensure(session, platform_key(kind), kind, currency, None)


def open_user_accounts(session: Session, user_id: str, currency: str) -> None:
    ensure_platform_accounts(session, currency)
    for kind in USER_KINDS:
        _ensure(session, user_key(user_id, kind), kind, currency, user_id)


def post(
    session: Session,
    transfer_id: str,
    debit: str,
    credit: str,
    amount: Money,
    kind: str,
    now: datetime,
    ref: str | None = None,
) -> LedgerTransferRow:
    """Post one balanced transfer, idempotently by `transfer_id`."""
    if amount.micros <= 0:
        raise ValueError("a transfer moves a positive amount")
    accounts = store.lock_accounts(session, [debit, credit])
    src, dst = accounts[debit], accounts[credit]
    existing = store.get_transfer(session, transfer_id)
    if existing is not None:
        same = (existing.debit_account_id, existing.credit_account_id, existing.amount) == (
            src.id,
            dst.id,
            amount.micros,
        )
        if not same:
            raise Conflict(f"transfer {transfer_id} exists with different parameters")
        return existing
    if amount.currency != src.currency or amount.currency != dst.currency:
        raise Conflict("currency mismatch in transfer")
    row = LedgerTransferRow(
        id=transfer_id,
        debit_account_id=src.id,
        credit_account_id=dst.id,
        amount=amount.micros,
        currency=amount.currency,
        kind=kind,
        ref=ref,
        created_at=now,
    )
    store.apply_transfer(session, row)
    return row


def grant_trial_credit(session: Session, user_id: str, amount: Money, now: datetime) -> None:
    post(
        session,
        f"trial:{user_id}",
        platform_key("promotions"),
        user_key(user_id, "trial_credit"),
        amount,
        "trial_credit",
        now,
        ref=user_id,
    )


def top_up(session: Session, user_id: str, amount: Money, now: datetime, reference: str) -> None:
    """Cash paid in (admin or payment provider); idempotent on `reference`."""
    post(
        session,
        f"topup:{reference}",
        platform_key("cash_in"),
        user_key(user_id, "cash"),
        amount,
        "top_up",
        now,
        ref=user_id,
    )


@dataclass(frozen=True)
class Balance:
    cash: Money
    trial_credit: Money

    @property
    def total(self) -> Money:
        return self.cash + self.trial_credit


def balance(session: Session, user_id: str, currency: str, lock: bool = False) -> Balance:
    keys = [user_key(user_id, kind) for kind in USER_KINDS]
    if lock:
        rows = store.lock_accounts(session, keys)
    else:
        rows = {k: r for k in keys if (r := store.get_account(session, k)) is not None}
    amounts = {k: balance_of(rows[k]) if k in rows else 0 for k in keys}
    return Balance(
        cash=Money(amounts[user_key(user_id, "cash")], currency),
        trial_credit=Money(amounts[user_key(user_id, "trial_credit")], currency),
    )


def charge_usage(
    session: Session, user_id: str, amount: Money, transfer_base: str, now: datetime, ref: str
) -> None:
    """Move `amount` to revenue: trial credit first (never below zero), the rest from cash."""
    if amount.micros <= 0:
        return
    revenue = platform_key("revenue")
    trial_key, cash_key = user_key(user_id, "trial_credit"), user_key(user_id, "cash")
    # One sorted lock call: every transaction takes `platform:*` before `user:*` (no deadlock).
    rows = store.lock_accounts(session, [revenue, trial_key, cash_key])
    from_trial = min(amount.micros, max(balance_of(rows[trial_key]), 0))
    from_cash = amount.micros - from_trial
    if from_trial:
        post(
            session,
            f"{transfer_base}:trial",
            trial_key,
            revenue,
            Money(from_trial, amount.currency),
            "usage",
            now,
            ref,
        )
    if from_cash:
        post(
            session,
            f"{transfer_base}:cash",
            cash_key,
            revenue,
            Money(from_cash, amount.currency),
            "usage",
            now,
            ref,
        )


@dataclass(frozen=True)
class Verification:
    balanced: bool
    accounts: int
    transfers: int
    problems: list[str]


def verify(session: Session) -> Verification:
    """Recompute every account from the transfers and check the ledger's invariants."""
    accounts = store.list_accounts(session)
    transfers = store.list_transfers(session)
    debits: dict[int, int] = {}
    credits: dict[int, int] = {}
    problems = []
    for t in transfers:
        if t.amount <= 0:
            problems.append(f"transfer {t.id} has non-positive amount")
        debits[t.debit_account_id] = debits.get(t.debit_account_id, 0) + t.amount
        credits[t.credit_account_id] = credits.get(t.credit_account_id, 0) + t.amount
    for a in accounts:
        if (a.debits_posted, a.credits_posted) != (debits.get(a.id, 0), credits.get(a.id, 0)):
            problems.append(f"account {a.key}: cached totals differ from its transfers")
        if a.kind == "trial_credit" and balance_of(a) < 0:
            problems.append(f"account {a.key}: credit balance below zero")
    if sum(debits.values()) != sum(credits.values()):
        problems.append("total debits differ from total credits")
    return Verification(not problems, len(accounts), len(transfers), problems)
