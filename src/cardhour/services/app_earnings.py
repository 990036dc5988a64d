"""The app marketplace's money: per-call charges, the developer/platform split, the 7-day hold on
the developer's share, refunds, payouts (docs/dev/marketplace.md).

Ledger accounts (all in the deployment's currency):
- `user:<dev>:app_earnings_pending`: the developer's share of calls younger than
  `MATURITY` (7 days); `..._available` once they are older; `..._payout` while a payout they
  asked for waits for the operator. All three are what the platform owes the developer.
- `platform:app_sales`: a clearing account each call passes through (it nets to zero per call);
  the platform's share goes to `platform:revenue`; paid-out earnings to `platform:app_payouts`.

A call (`charge_call`), in one transaction: the caller's cash pays the price into `app_sales`,
which passes the developer's share (rounded down to the micro-unit, `core.apps.split`) to their
pending account and the rest to revenue. Credits (trial, SLA, grants) are for GPU time and do
not pay for calls: a developer's share becomes money paid out, and promotional credit must not
turn into it. Idempotent per (caller, call key); a caller whose cash does not cover the price is
refused (InsufficientBalance) and nothing moves. A refund (`refund_call`) within the 7 days
reverses both shares and pays the caller back in cash. `mature` moves shares older than 7 days
to available; `request_payout` moves available earnings to the payout account; `mark_paid`
(operator) closes it into `app_payouts`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cardhour.core import apps
from cardhour.core.errors import Conflict, InsufficientBalance, InvalidInput, NotFound
from cardhour.core.money import Money
from cardhour.db.app_models import AppCallRow, AppRow, AppVersionRow, PayoutRow
from cardhour.db.locking import for_claim, for_update
from cardhour.services import ledger
from cardhour.services.ids import new_id

MATURITY = timedelta(days=7)
EARNING_KINDS = ledger.EARNING_KINDS
PENDING, AVAILABLE, PAYOUT = EARNING_KINDS
SALES, REVENUE, PAID_OUT = "app_sales", "revenue", "app_payouts"
OK, REFUNDED = "ok", "refunded"


def check_call_key(call_key: str) -> None:
    if not 1 <= len(call_key) <= 128:
        raise InvalidInput("a call id has 1 to 128 characters", field="call_id")


def cash_of(session: Session, user_id: str) -> int:
    """The user's cash balance as posted (no lock: the charge checks again under its lock)."""
    row = ledger.store.get_account(session, ledger.user_key(user_id, ledger.CASH))
    return ledger.balance_of(row) if row is not None else 0


def open_developer_accounts(session: Session, developer_id: str, currency: str) -> None:
    """The developer's earnings accounts (opened when they publish, never by a call, so calls
    do not race to create them)."""
    for kind in EARNING_KINDS:
        ledger.ensure_account(
            session, ledger.user_key(developer_id, kind), kind, currency, developer_id
        )


def charge_call(
    session: Session,
    app: AppRow,
    version: AppVersionRow,
    caller_id: str,
    call_key: str,
    now: datetime,
    currency: str,
    duration_ms: int = 0,
    developer_bp: int = apps.DEFAULT_DEVELOPER_SHARE_BP,
) -> AppCallRow:
    """Charge one successful call (module docstring); the same (caller, call key) again returns
    the first call. Conflict when that key was used for another app."""
    check_call_key(call_key)
    cash = ledger.user_key(caller_id, ledger.CASH)
    pending = ledger.user_key(app.developer_id, PENDING)
    sales, revenue = ledger.platform_key(SALES), ledger.platform_key(REVENUE)
    book = ledger.open_book(session, now, [cash, pending, sales, revenue])
    existing = call_by_key(session, caller_id, call_key)  # after the lock: one at a time
    if existing is not None:
        if existing.app_id != app.id:
            raise Conflict(f"call id {call_key!r} was used for another app", field="call_id")
        return existing
    developer, platform = apps.split(version.price_micros, developer_bp)
    call = AppCallRow(
        id=new_id(),
        call_key=call_key,
        app_id=app.id,
        version=version.version,
        caller_id=caller_id,
        developer_id=app.developer_id,
        status=OK,
        price_micros=version.price_micros,
        developer_micros=developer,
        platform_micros=platform,
        duration_ms=duration_ms,
        at=now,
        matures_at=now + MATURITY,
    )
    have = book.balance(cash)
    if have < call.price_micros:
        shown = Money(max(have, 0), currency)
        raise InsufficientBalance(
            f"cash {shown.floor_str()} {currency} does not cover one call "
            f"({Money(call.price_micros, currency).display()} {currency}); app calls are paid "
            "in cash (top up), not with credits",
            needed=Money(call.price_micros, currency).display(),
            available=shown.floor_str(),
        )
    book.transfer(f"app_call:{call.id}", cash, sales, call.price_micros, "app_call", call.id)
    if developer:
        book.transfer(
            f"app_call:{call.id}:developer", sales, pending, developer, "app_share", call.id
        )
    if platform:
        book.transfer(f"app_call:{call.id}:platform", sales, revenue, platform, "app_fee", call.id)
    book.flush()
    session.add(call)
    session.flush()
    return call


def refund_call(session: Session, call_id: str, now: datetime) -> AppCallRow:
    """Reverse a call's split and pay its price back to the caller in cash, within the 7 days
    its developer's share is pending. Idempotent; Conflict once the share is available."""
    call = session.scalars(for_update(select(AppCallRow).where(AppCallRow.id == call_id))).first()
    if call is None:
        raise NotFound(f"no call {call_id!r}")
    if call.status == REFUNDED:
        return call
    if call.matured_at is not None:
        raise Conflict(f"call {call_id} is past its {MATURITY.days}-day refund window")
    sales, pending = ledger.platform_key(SALES), ledger.user_key(call.developer_id, PENDING)
    revenue, cash = ledger.platform_key(REVENUE), ledger.user_key(call.caller_id, ledger.CASH)
    book = ledger.open_book(session, now, [sales, pending, revenue, cash])
    if call.developer_micros:
        book.transfer(
            f"app_refund:{call.id}:developer",
            pending,
            sales,
            call.developer_micros,
            "app_refund",
            call.id,
        )
    if call.platform_micros:
        book.transfer(
            f"app_refund:{call.id}:platform",
            revenue,
            sales,
            call.platform_micros,
            "app_refund",
            call.id,
        )
    book.transfer(f"app_refund:{call.id}", sales, cash, call.price_micros, "app_refund", call.id)
    book.flush()
    call.status, call.refunded_at = REFUNDED, now
    session.flush()
    return call


def mature(session: Session, now: datetime, limit: int = 5000) -> int:
    """Developers' shares of calls older than `MATURITY` become available: one transfer per
    developer per pass, in the transaction that marks the calls. Returns the calls matured."""
    stmt = (
        select(AppCallRow)
        .where(
            AppCallRow.status == OK, AppCallRow.matured_at.is_(None), AppCallRow.matures_at <= now
        )
        .order_by(AppCallRow.id)
        .limit(limit)
    )
    calls = list(session.scalars(for_claim(stmt)))
    if not calls:
        return 0
    by_developer: dict[str, list[AppCallRow]] = {}
    for call in calls:
        by_developer.setdefault(call.developer_id, []).append(call)
    keys = [ledger.user_key(d, k) for d in by_developer for k in (PENDING, AVAILABLE)]
    book = ledger.open_book(session, now, keys)
    for developer, mine in sorted(by_developer.items()):
        amount = sum(c.developer_micros for c in mine)
        if amount:
            book.transfer(
                f"app_mature:{developer}:{mine[0].id}:{len(mine)}",
                ledger.user_key(developer, PENDING), ledger.user_key(developer, AVAILABLE),
                amount, "app_matured", None,
            )  # fmt: skip
        for call in mine:
            call.matured_at = now
    book.flush()
    session.flush()
    return len(calls)


def request_payout(
    session: Session, developer_id: str, amount: Money | None, now: datetime, currency: str
) -> PayoutRow:
    """Ask to be paid `amount` (None: everything available) of the available earnings."""
    available_key = ledger.user_key(developer_id, AVAILABLE)
    payout_key = ledger.user_key(developer_id, PAYOUT)
    book = ledger.open_book(session, now, [available_key, payout_key])
    if available_key not in book.accounts:
        raise Conflict("you have no earnings: publish an app first")
    have = book.balance(available_key)
    wanted = have if amount is None else amount.micros
    if wanted <= 0:
        raise Conflict(
            "no earnings are available yet (a call's share is available 7 days after it)"
        )
    if wanted > have:
        shown = Money(have, currency).floor_str()
        raise Conflict(f"only {shown} {currency} is available", available=shown)
    payout = PayoutRow(
        id=new_id(),
        developer_id=developer_id,
        amount_micros=wanted,
        currency=currency,
        status="requested",
        requested_at=now,
    )
    book.transfer(
        f"app_payout:{payout.id}", available_key, payout_key, wanted, "app_payout", payout.id
    )
    book.flush()
    session.add(payout)
    session.flush()
    return payout


def mark_paid(session: Session, payout_id: str, reference: str | None, now: datetime) -> PayoutRow:
    """The operator paid it (bank transfer `reference`); idempotent."""
    payout = session.scalars(for_update(select(PayoutRow).where(PayoutRow.id == payout_id))).first()
    if payout is None:
        raise NotFound(f"no payout {payout_id!r}")
    if payout.status == "paid":
        return payout
    payout_key = ledger.user_key(payout.developer_id, PAYOUT)
    paid_out = ledger.platform_key(PAID_OUT)
    book = ledger.open_book(session, now, [payout_key, paid_out])
    book.transfer(
        f"app_paid:{payout.id}", payout_key, paid_out, payout.amount_micros, "app_paid", payout.id
    )
    book.flush()
    payout.status, payout.paid_at, payout.reference = "paid", now, reference
    session.flush()
    return payout


@dataclass(frozen=True)
class Earnings:
    """A developer's dashboard figures, in micro-units."""

    calls: int
    refunded: int
    gross: int  # what callers paid for calls not refunded
    developer_share: int
    pending: int
    available: int
    in_payout: int
    paid: int


def earnings(session: Session, developer_id: str) -> Earnings:
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
    by_status = {status: (int(n), int(gross), int(share)) for status, n, gross, share in rows}
    ok = by_status.get(OK, (0, 0, 0))
    balances = {}
    for kind in EARNING_KINDS:
        row = ledger.store.get_account(session, ledger.user_key(developer_id, kind))
        balances[kind] = ledger.balance_of(row) if row is not None else 0
    paid = session.scalar(
        select(func.coalesce(func.sum(PayoutRow.amount_micros), 0)).where(
            PayoutRow.developer_id == developer_id, PayoutRow.status == "paid"
        )
    )
    return Earnings(
        calls=ok[0],
        refunded=by_status.get(REFUNDED, (0, 0, 0))[0],
        gross=ok[1],
        developer_share=ok[2],
        pending=balances[PENDING],
        available=balances[AVAILABLE],
        in_payout=balances[PAYOUT],
        paid=int(paid or 0),
    )


def payouts_of(session: Session, developer_id: str) -> list[PayoutRow]:
    stmt = select(PayoutRow).where(PayoutRow.developer_id == developer_id)
    return list(session.scalars(stmt.order_by(PayoutRow.requested_at, PayoutRow.id)))


def call_by_key(session: Session, caller_id: str, call_key: str) -> AppCallRow | None:
    stmt = select(AppCallRow).where(
        AppCallRow.caller_id == caller_id, AppCallRow.call_key == call_key
    )
    return session.scalars(stmt).first()
