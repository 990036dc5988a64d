"""The app marketplace's money: per-call charges, the developer/platform split, the 7-day hold on
the developer's share, refunds, payouts (docs/dev/marketplace.md).

Ledger accounts (all in the deployment's currency):
- `user:<dev>:app_earnings_pending`: the developer's share of calls younger than
  `MATURITY` (7 days); `..._available` once they are older; `..._payout` while a payout they
  asked for waits for the operator. All three are what the platform owes the developer.
- `platform:app_sales`: a clearing account each call passes through (it nets to zero per call);
  the platform's share goes to `platform:revenue`; paid-out earnings to `platform:app_payouts`.

A call is recorded by the gateway (`record_call`: one row, idempotent per caller and call key,
its split computed: the developer's share rounded down to the micro-unit, `core.apps.split`)
and posted by the settlement pass (`settle`, the apps reconciler, every second or so): in one
transaction per batch, each caller's cash pays their calls into `app_sales`, which passes each
developer's shares to their pending account and the rest to revenue. Posting in batches keeps
the ledger off the call's path (one statement per call, docs/benchmarks/marketplace.md); until
settled, a call counts against the caller's `spendable` cash. Credits (trial, SLA, grants) are
for GPU time and do not pay for calls: a developer's share becomes money paid out, and
promotional credit must not turn into it. A refund (`refund_call`) within the 7 days settles the
call if it was not yet, then reverses both shares and pays the caller back in cash. `mature`
moves settled shares older than 7 days to available; `request_payout` moves available earnings
to the payout account; `mark_paid` (operator) closes it into `app_payouts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core import apps
from cardhour.core.errors import Conflict, InvalidInput, NotFound
from cardhour.core.money import Money
from cardhour.db.models import AppCallRow, PayoutRow
from cardhour.services.billing import ledger
from cardhour.services.ids import new_id
from cardhour.store.marketplace import calls as call_store
from cardhour.store.marketplace import payouts as payout_store

MATURITY = timedelta(days=7)
EARNING_KINDS = ledger.EARNING_KINDS
PENDING, AVAILABLE, PAYOUT = EARNING_KINDS
SALES, REVENUE, PAID_OUT = "app_sales", "revenue", "app_payouts"
OK, REFUNDED = call_store.OK, call_store.REFUNDED


def check_call_key(call_key: str) -> None:
    """InvalidInput unless the call id has 1 to 128 characters."""
    if not 1 <= len(call_key) <= 128:
        raise InvalidInput("a call id has 1 to 128 characters", field="call_id")


def open_developer_accounts(session: Session, developer_id: str, currency: str) -> None:
    """The developer's earnings accounts (opened when they publish, never by a call, so calls
    do not race to create them)."""
    for kind in EARNING_KINDS:
        ledger.ensure_account(
            session, ledger.user_key(developer_id, kind), kind, currency, developer_id
        )


@dataclass(frozen=True)
class NewCall:
    """A successful call as the gateway records it (prices in micro-units)."""

    app_id: str
    version: int
    caller_id: str
    developer_id: str
    call_key: str
    price_micros: int
    duration_ms: int


def call_row(call: NewCall, now: datetime, developer_bp: int) -> dict[str, object]:
    """The `app_calls` row of a call: its split (`core.apps.split`), not yet settled."""
    check_call_key(call.call_key)
    developer, platform = apps.split(call.price_micros, developer_bp)
    return {
        "id": new_id(),
        "call_key": call.call_key,
        "app_id": call.app_id,
        "version": call.version,
        "caller_id": call.caller_id,
        "developer_id": call.developer_id,
        "status": OK,
        "price_micros": call.price_micros,
        "developer_micros": developer,
        "platform_micros": platform,
        "duration_ms": call.duration_ms,
        "at": now,
        "matures_at": now + MATURITY,
        "settled_at": None,
    }


def record_call(
    session: Session,
    call: NewCall,
    now: datetime,
    developer_bp: int = apps.DEFAULT_DEVELOPER_SHARE_BP,
) -> str | None:
    """Record a successful call, unsettled; its id, or None when the key was recorded before
    (`store.marketplace.calls.record_statement`, the gateway's INSERT)."""
    return call_store.insert_call(session, call_row(call, now, developer_bp))


def settle(
    session: Session, now: datetime, call_ids: Sequence[str] | None = None, limit: int = 5000
) -> int:
    """Post recorded calls (all unsettled ones up to `limit`, or those of `call_ids`) to the
    ledger in one batch: each caller's cash pays their calls into `app_sales`, which passes each
    developer's shares to their pending earnings and the rest to revenue. Cash may go below zero
    here: the calls ran (the gateway checked the balance before each, `spendable`; callers
    calling through several gateway processes at once can overspend by the calls those made in
    the balance cache's lifetime). Returns the calls settled."""
    calls = call_store.claim_unsettled(session, call_ids, limit)
    if not calls:
        return 0
    paid: dict[str, int] = {}
    earned: dict[str, int] = {}
    for call in calls:
        paid[call.caller_id] = paid.get(call.caller_id, 0) + call.price_micros
        earned[call.developer_id] = earned.get(call.developer_id, 0) + call.developer_micros
    # a caller with a price to pay has a cash account: the gateway let them call on its balance
    sales, revenue = ledger.platform_key(SALES), ledger.platform_key(REVENUE)
    keys = [ledger.user_key(c, ledger.CASH) for c, amount in paid.items() if amount]
    keys += [ledger.user_key(d, PENDING) for d in earned]
    book = ledger.open_book(session, now, [*keys, sales, revenue])
    batch = new_id()
    for caller, amount in sorted(paid.items()):
        if amount:
            book.transfer(
                f"app_calls:{batch}:{caller}", ledger.user_key(caller, ledger.CASH), sales,
                amount, "app_call", batch,
            )  # fmt: skip
    for developer, amount in sorted(earned.items()):
        if amount:
            book.transfer(
                f"app_calls:{batch}:share:{developer}", sales, ledger.user_key(developer, PENDING),
                amount, "app_share", batch,
            )  # fmt: skip
    fee = sum(c.platform_micros for c in calls)
    if fee:
        book.transfer(f"app_calls:{batch}:fee", sales, revenue, fee, "app_fee", batch)
    book.flush()
    for call in calls:
        call.settled_at = now
    session.flush()
    return len(calls)


def spendable(session: Session, caller_id: str) -> int:
    """The caller's cash as posted, less the price of their calls recorded but not settled yet:
    what the gateway lets them spend on calls (credits do not pay for calls). One statement, so
    one snapshot even outside a transaction (a settlement moves a call from one term to the
    other)."""
    return call_store.spendable(session, caller_id, ledger.user_key(caller_id, ledger.CASH))


def refund_call(session: Session, call_id: str, now: datetime) -> AppCallRow:
    """Reverse a call's split and pay its price back to the caller in cash, within the 7 days
    its developer's share is pending. Idempotent; Conflict once the share is available."""
    call = call_store.get_call_for_update(session, call_id)
    if call is None:
        raise NotFound(f"no call {call_id!r}")
    if call.status == REFUNDED:
        return call
    if call.matured_at is not None:
        raise Conflict(f"call {call_id} is past its {MATURITY.days}-day refund window")
    if call.settled_at is None:  # post it first, then reverse it
        settle(session, now, [call.id])
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
    calls = call_store.claim_maturing(session, now, limit)
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
    payout_store.add_payout(session, payout)
    session.flush()
    return payout


def mark_paid(session: Session, payout_id: str, reference: str | None, now: datetime) -> PayoutRow:
    """The operator paid it (bank transfer `reference`); idempotent."""
    payout = payout_store.get_payout_for_update(session, payout_id)
    if payout is None:
        raise NotFound(f"no payout {payout_id!r}")
    if payout.status == payout_store.PAID:
        return payout
    payout_key = ledger.user_key(payout.developer_id, PAYOUT)
    paid_out = ledger.platform_key(PAID_OUT)
    book = ledger.open_book(session, now, [payout_key, paid_out])
    book.transfer(
        f"app_paid:{payout.id}", payout_key, paid_out, payout.amount_micros, "app_paid", payout.id
    )
    book.flush()
    payout.status, payout.paid_at, payout.reference = payout_store.PAID, now, reference
    session.flush()
    return payout


@dataclass(frozen=True)
class Earnings:
    """A developer's dashboard figures, in micro-units."""

    calls: int
    refunded: int
    gross: int  # what callers paid for calls not refunded
    developer_share: int
    pending: int  # in the ledger, and the shares of calls not yet settled
    available: int
    in_payout: int
    paid: int


def earnings(session: Session, developer_id: str) -> Earnings:
    """The developer's dashboard: calls by outcome, what they paid, and the earnings accounts'
    balances (pending counts the shares of calls not yet settled)."""
    by_status = call_store.totals_by_status(session, developer_id)
    ok = by_status.get(OK, (0, 0, 0))
    balances = {}
    for kind in EARNING_KINDS:
        row = ledger.store.get_account(session, ledger.user_key(developer_id, kind))
        balances[kind] = ledger.balance_of(row) if row is not None else 0
    unsettled = call_store.unsettled_share(session, developer_id)
    paid = payout_store.paid_total(session, developer_id)
    return Earnings(
        calls=ok[0],
        refunded=by_status.get(REFUNDED, (0, 0, 0))[0],
        gross=ok[1],
        developer_share=ok[2],
        pending=balances[PENDING] + unsettled,
        available=balances[AVAILABLE],
        in_payout=balances[PAYOUT],
        paid=paid,
    )


def payouts_of(session: Session, developer_id: str) -> list[PayoutRow]:
    """The developer's payouts, oldest request first (ties by id): the API's `GET
    /developer/payouts` and the console's dashboard."""
    return payout_store.list_payouts_of(session, developer_id)


def call_by_key(session: Session, caller_id: str, call_key: str) -> AppCallRow | None:
    """The caller's call recorded under `call_key`, if any."""
    return call_store.get_call_by_key(session, caller_id, call_key)
