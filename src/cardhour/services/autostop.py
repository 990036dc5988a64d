"""The metering pass: expire credits, end or convert monthly plans, charge running instances on
a cadence, and warn then stop owners whose money runs out.

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
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.money import Money
from cardhour.core.states import InstanceStatus, Plan
from cardhour.db.models import InstanceEventRow, InstanceRow
from cardhour.services import ledger, metering, pricing, wallet
from cardhour.services.instances import switch_status
from cardhour.services.ledger import CASH, Account, Book
from cardhour.store import instances as store
from cardhour.store import users as user_store


@dataclass
class MeteringResult:
    charged: dict[str, Money] = field(default_factory=dict)  # instance id -> charged this pass
    stopped: list[str] = field(default_factory=list)
    warned: list[str] = field(default_factory=list)  # owner ids warned this pass
    expired_credits: int = 0
    plans_ended: list[str] = field(default_factory=list)


def covers(book: Book, rows: list[InstanceRow], owed: dict[str, int], seconds: int) -> bool:
    """Whether one owner's money covers what `rows` owe (`owed`, by instance id) plus `seconds`
    more of each, drawing as the charges would (hold, credits for the model, cash down to zero),
    in memory only."""
    left = {a.key: ledger.balance_of(a) for a in book.owned(rows[0].owner_id)}
    by_model: dict[str, list[Account]] = {}
    for row in rows:
        need = owed[row.id] + metering.cost_of_seconds(row, seconds)
        if row.gpu_model not in by_model:
            by_model[row.gpu_model] = wallet.sources(book, row.owner_id, row.gpu_model)
        hold = book.accounts.get(ledger.hold_key(row.owner_id, row.id))
        for source in ([hold] if hold is not None else []) + by_model[row.gpu_model]:
            take = min(need, max(left[source.key], 0))
            left[source.key] -= take
            need -= take
            if need == 0:
                break
        if need > 0:
            return False
    return True


def _end_plan(session: Session, row: InstanceRow, now: datetime, result: MeteringResult) -> None:
    """The 30 days are over: stop, or carry on billed per second, as the owner chose."""
    assert row.plan_until is not None
    ended = as_utc(row.plan_until)
    row.plan = Plan.ON_DEMAND.value
    result.plans_ended.append(row.id)
    prices = pricing.history(session)
    if row.data_centre is not None:
        row.price_micros = prices.at(row.gpu_model, row.data_centre, ended).micros
    if row.plan_at_expiry == "on_demand":
        metering.open_usage(row, ended)  # billed from the end of the plan, to the second
        _event(session, row, now, "monthly plan ended: now billed on demand")
        return
    row.desired = "stopped"
    switch_status(session, row, InstanceStatus.STOPPING, now, "monthly plan ended")


def _event(session: Session, row: InstanceRow, now: datetime, reason: str) -> None:
    store.add_event(
        session,
        InstanceEventRow(
            instance_id=row.id, at=now, from_status=row.status, to_status=row.status, reason=reason
        ),
    )


def meter_and_autostop(
    session: Session,
    now: datetime,
    warn_seconds: int = 60,
    grace_seconds: int = 30,
    charge_every_seconds: int = 0,
) -> MeteringResult:
    result = MeteringResult()
    result.expired_credits = ledger.expire_credits(session, now)
    running = store.list_in_status(session, [InstanceStatus.RUNNING.value], lock=True)
    for row in running:
        if row.plan == Plan.MONTHLY.value and row.plan_until and as_utc(row.plan_until) <= now:
            _end_plan(session, row, now, result)
    metered = [
        r for r in running if r.status == InstanceStatus.RUNNING.value and metering.metered(r)
    ]
    if not metered:
        return result
    prices = pricing.history(session)
    book = wallet.open_wallet(session, now, sorted({r.owner_id for r in metered}), ["revenue"])
    every = timedelta(seconds=charge_every_seconds)
    due_rows = [r for r in metered if r.charged_at is None or now - as_utc(r.charged_at) >= every]
    for instance_id, micros in metering.settle_rows(session, book, due_rows, now, prices).items():
        result.charged[instance_id] = Money(
            micros, book.row(ledger.platform_key("revenue")).currency
        )
    book.flush()
    by_owner: dict[str, list[InstanceRow]] = defaultdict(list)
    for row in metered:
        by_owner[row.owner_id].append(row)
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
            for row in rows:
                _event(
                    session,
                    row,
                    now,
                    f"balance low (cash {cash.floor_str()}): stops at "
                    f"{now + timedelta(seconds=grace_seconds):%H:%M:%S} UTC unless topped up",
                )
        waited = now - as_utc(user.low_balance_since) >= timedelta(seconds=grace_seconds)
        in_debt = book.balance(ledger.user_key(owner_id, CASH)) < 0
        if not waited and not in_debt and covers(book, rows, owed, 0):
            continue
        for row in rows:
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
