"""The metering pass: end or convert monthly plans, charge running instances on a cadence, and
warn then stop owners whose money runs out. (Expired credits are swept just before, in their
own transaction: `credit_accounts.expire_credits`.)

Charges are posted at most every `charge_every_seconds` per instance (and always when an instance
leaves `running`), so the ledger gets one transfer per source per instance per interval.
Low balance (docs/dev/billing.md): when an owner's money — each instance's hold, then the
credits usable for its model, then cash down to zero — cannot cover what their metered instances
owe plus the next `warn_seconds` of them, the owner is warned (`users.low_balance_since`, an
event on each instance, the console banner). They are stopped `grace_seconds` later unless the
balance recovered, and at once when it cannot even cover what they already owe, so no cash
account goes below zero by more than a tick of usage.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.money import Money, card_time_for, card_time_value
from cardhour.core.pricing import PriceHistory
from cardhour.core.states import InstanceStatus, Plan
from cardhour.db.models import InstanceRow
from cardhour.services.billing import ledger, metering, pricing, wallet
from cardhour.services.billing.ledger import CASH, Account, Book
from cardhour.services.compute.lifecycle import end_plan_if_over, switch_status
from cardhour.store.accounts import users as user_store
from cardhour.store.billing import usage as usage_store
from cardhour.store.billing.usage import Rated, RunningRow
from cardhour.store.compute import instances as store
from cardhour.store.compute.instances import note


@dataclass
class MeteringResult:
    charged: dict[str, Money] = field(default_factory=dict)  # instance id -> charged this pass
    stopped: list[str] = field(default_factory=list)
    warned: list[str] = field(default_factory=list)  # owner ids warned this pass
    plans_ended: list[str] = field(default_factory=list)


def covers(book: Book, rows: Sequence[Rated], owed: dict[str, int], seconds: int) -> bool:
    """Whether one owner's money covers what `rows` owe (`owed`, by instance id) plus `seconds`
    more of each, drawing as the charges would (grant hours, hold, credits for the model, cash
    down to zero), in memory only."""
    owner_id = rows[0].owner_id
    needs = [owed[row.id] + metering.cost_of_seconds(row, seconds) for row in rows]
    cash = book.accounts.get(ledger.user_key(owner_id, CASH))
    if cash is not None and ledger.balance_of(cash) >= sum(needs):
        return True  # cash alone covers it, and every other source is drawn before cash
    left = {a.key: ledger.balance_of(a) for a in book.owned(owner_id)}
    left.update((k, book.balance(k)) for k in book.shared.get(owner_id, []))
    by_model: dict[str, list[Account]] = {}
    for row, need in zip(rows, needs, strict=True):
        model = wallet.paid_as(row)  # a run without GPUs: no grant hours, no tied credits
        for grant in wallet.grant_sources(book, owner_id, model):
            take = min(need, card_time_value(max(left[grant.key], 0), row.price_micros))
            left[grant.key] -= card_time_for(take, row.price_micros)
            need -= take
        if model not in by_model:
            by_model[model] = wallet.sources(book, row.owner_id, model)
        hold = book.accounts.get(ledger.hold_key(row.owner_id, row.id))
        for source in ([hold] if hold is not None else []) + by_model[model]:
            take = min(need, max(left[source.key], 0))
            left[source.key] -= take
            need -= take
            if need == 0:
                break
        if need > 0:
            return False
    return True


def _changes(row: RunningRow, now: datetime, prices: PriceHistory) -> bool:
    """Whether the pass changes the row beyond its charge: a plan that ends, a segment split."""
    ends = row.plan == Plan.MONTHLY.value and row.plan_until is not None
    if ends and row.plan_until is not None and as_utc(row.plan_until) <= now:
        return True
    return metering.splits(row, now, prices)


def meter_and_autostop(
    session: Session,
    now: datetime,
    warn_seconds: int = 60,
    grace_seconds: int = 30,
    charge_every_seconds: int = 0,
) -> MeteringResult:
    """One pass over the running instances (the caller's transaction): end monthly plans that
    are over, charge what is due, then warn or stop owners who ran out (module docstring).

    Every running instance is read and locked as a plain tuple (`RunningRow`); only those the
    pass changes beyond their charge, or stops, are loaded as ORM objects."""
    result = MeteringResult()
    running = usage_store.lock_running(session)
    owners = sorted({r.owner_id for r in running})
    # every account this pass may touch, locked now in the one sorted call the lock order asks
    # for (ending a plan below releases and charges: the book is read again after that)
    book = wallet.open_wallet(session, now, owners, ["revenue"]) if owners else None
    prices = pricing.history(session)
    objects = store.lock_many(session, [r.id for r in running if _changes(r, now, prices)])
    for row in objects.values():
        if end_plan_if_over(session, row, now):
            result.plans_ended.append(row.id)
            if row.plan_at_expiry == "on_demand":
                note(session, row, now, "monthly plan ended: now billed on demand")
            else:
                row.desired = "stopped"
                switch_status(session, row, InstanceStatus.STOPPING, now, "monthly plan ended")
    metered = [
        each
        for each in (objects.get(r.id, r) for r in running)
        if each.status == InstanceStatus.RUNNING.value and metering.metered(each)
    ]
    user_store.clear_low_balance(session, exclude=sorted({r.owner_id for r in metered}))
    if not metered:
        return result
    if book is None or result.plans_ended:
        book = wallet.open_wallet(session, now, owners, ["revenue"])
    every = timedelta(seconds=charge_every_seconds)
    due_rows = [r for r in metered if r.charged_at is None or now - as_utc(r.charged_at) >= every]
    charges = metering.settle_rows(session, book, due_rows, now, prices)
    currency = book.row(ledger.platform_key("revenue")).currency
    for instance_id, micros in charges.items():
        result.charged[instance_id] = Money(micros, currency)
    book.flush()
    by_owner: dict[str, list[InstanceRow | RunningRow]] = defaultdict(list)
    for each in metered:
        by_owner[each.owner_id].append(each)
    warned = user_store.low_balance_users(session, list(by_owner))
    owed = {r.id: 0 if r.id in result.charged else max(metering.due(r, now), 0) for r in metered}
    for owner_id, rows in by_owner.items():
        if covers(book, rows, owed, warn_seconds):
            if owner_id in warned:
                warned[owner_id].low_balance_since = None
            continue
        user = warned.get(owner_id) or user_store.get_user(session, owner_id)
        assert user is not None
        if user.low_balance_since is None:
            user.low_balance_since = now
            result.warned.append(owner_id)
            cash = Money(book.balance(ledger.user_key(owner_id, CASH)), rows[0].currency)
            for each in rows:
                note(
                    session,
                    each,
                    now,
                    f"balance low (cash {cash.floor_str()}): stops at "
                    f"{now + timedelta(seconds=grace_seconds):%H:%M:%S} UTC unless topped up",
                )
        waited = now - as_utc(user.low_balance_since) >= timedelta(seconds=grace_seconds)
        in_debt = book.balance(ledger.user_key(owner_id, CASH)) < 0
        if not waited and not in_debt and covers(book, rows, owed, 0):
            continue
        for each in rows:
            found = each if isinstance(each, InstanceRow) else store.get_instance(session, each.id)
            assert found is not None
            row = found
            row.desired = "stopped"
            switch_status(
                session,
                row,
                InstanceStatus.STOPPING,
                now,
                "stopped automatically: balance exhausted",
            )
            result.stopped.append(row.id)
        user.low_balance_since = None
    session.flush()
    return result
