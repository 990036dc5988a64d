"""An instance's one state function, and what rides on its changes: metering, holds, GPU
allocations, the monthly plan, the run price, the SLA. Everything here runs in the caller's
transaction; nothing calls a backend.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.errors import InvalidTransition
from cardhour.core.money import Money
from cardhour.core.pricing import PriceHistory
from cardhour.core.states import HOLDS_GPUS, InstanceStatus, Plan, can_transition
from cardhour.db.models import InstanceEventRow, InstanceRow
from cardhour.services.billing import ledger, metering, pricing, wallet
from cardhour.services.compute import sla
from cardhour.services.storage import disks, volumes
from cardhour.store.compute import instances as store
from cardhour.store.compute import nodes as node_store

S = InstanceStatus
#: Statuses in which an instance keeps its hold (money set aside at launch or start).
COMMITTED = (S.PENDING, S.PROVISIONING, S.RUNNING)
PLAN_PERIOD = timedelta(days=30)


def switch_status(
    session: Session,
    row: InstanceRow,
    new: InstanceStatus,
    now: datetime,
    reason: str | None = None,
) -> None:
    """The only way an instance changes state: checks the transition, keeps metering and GPU
    allocations consistent with the new state, and records an event — all in the caller's
    transaction."""
    current = S(row.status)
    if not can_transition(current, new):
        raise InvalidTransition(f"instance {row.name} cannot go from {current} to {new}")
    if row.placement_dc is not None or row.disk_host is not None:
        _storage(session, row, new, now)  # its volumes' rows: locked before any account
    end_plan_if_over(session, row, now)
    if current == S.RUNNING:
        metering.close_usage(session, row, now, pricing.history(session))
    if new == S.FAILED:  # lost by the platform, running or while a node was being replaced
        _refund_unused_plan(session, row, now)
    if new == S.RUNNING:
        # ready again after the platform replaced a node (no request open): the run goes on
        # at its price
        repaired = row.requested_at is None and store.has_run(session, row.id)
        if row.plan == Plan.MONTHLY.value and row.plan_until is None:
            _start_plan(session, row, now)
        elif not metering.on_plan(row, now):
            if row.data_centre is not None and not repaired:  # the price in force now
                fix_price(session, row, pricing.history(session), now)
            metering.open_usage(row, now)
    if current in COMMITTED and new not in COMMITTED:
        wallet.release_hold(session, row, now)
    if current in HOLDS_GPUS and new not in HOLDS_GPUS:
        node_store.release_allocations(session, row.id)
    if current == S.STOPPED and new == S.PENDING:  # a user's start; not a replacement
        row.requested_at, row.sla_warned_at = now, None
    # given up before it was ready (a running instance's request was settled when it ran)
    given_up = current in (S.PENDING, S.PROVISIONING) and new not in COMMITTED
    row.status = new.value
    row.status_reason = reason
    row.updated_at = now
    row.lease_token = None
    row.lease_expires_at = None
    store.add_event(
        session,
        InstanceEventRow(
            instance_id=row.id,
            at=now,
            from_status=current.value,
            to_status=new.value,
            reason=reason,
        ),
    )
    if new == S.RUNNING:
        sla.settle_ready(session, row, now)
    elif given_up:  # time back if the SLA window had passed
        sla.settle_given_up(session, row, now, by_platform=new == S.FAILED)


def _storage(session: Session, row: InstanceRow, new: InstanceStatus, now: datetime) -> None:
    """What the instance's volumes and kept disk do as it goes to `new` (their rows locked in
    one query, in id order: the lock order of volumes)."""
    volumes.lock_of_instance(session, row)
    if new not in (S.PENDING, S.PROVISIONING):  # a move is over: done, or given up
        row.move_from = None
    if new == S.RUNNING:
        volumes.formatted(session, row, now)
        if row.disk_host is not None:  # running from its kept disk: storage no more
            disks.ended(session, row, now, f"instance {row.name} runs from it again")
            if not volumes.pins_to_host(session, row):
                row.placement_host = None  # a later placement may go anywhere
    elif new == S.TERMINATED:
        volumes.detach(session, row, now)
        disks.ended(session, row, now, f"instance {row.name} was terminated")


def fix_price(session: Session, row: InstanceRow, prices: PriceHistory, now: datetime) -> None:
    """The one place an instance's price per card-hour is fixed: the price in force at `now`
    in its data centre (`pricing.run_price`; the plan's, before a monthly plan starts), never
    above what its quote promised until it first runs. Called when it is placed (the price a
    wait is credited at and a monthly plan is charged at when it starts), when its run starts
    (usage is billed at the price in force then) and when a plan turns on demand. A run
    without GPUs keeps the price its start fixed (`services.storage.starts`)."""
    assert row.data_centre is not None
    if row.no_gpu:
        return
    first = row.quoted_price_micros is not None and not store.has_run(session, row.id)
    row.price_micros = pricing.run_price(prices, row, row.data_centre, now, first).micros


def _start_plan(session: Session, row: InstanceRow, now: datetime) -> None:
    """The monthly plan starts when the instance first runs: its price for the data centre it
    landed in is taken from the hold up front, the rest of the hold goes back."""
    total = pricing.plan_total(metering.price_of(row), row.gpu_count).micros
    book = wallet.open_wallet(session, now, [row.owner_id], ["revenue"])
    from_hold = min(total, wallet.hold_balance(book, row))
    revenue = ledger.platform_key("revenue")
    if from_hold:
        book.transfer(
            f"plan:{row.id}:hold",
            ledger.hold_key(row.owner_id, row.id),
            revenue,
            from_hold,
            "plan",
            row.id,
        )
    # the hold was the dearest data centre's plan and placement never charges more: nothing is
    # left to draw, and if something were, it must not overdraw
    wallet.draw(
        book,
        row.owner_id,
        row.gpu_model,
        total - from_hold,
        revenue,
        f"plan:{row.id}",
        "plan",
        row.id,
        overdraft=False,
    )
    book.flush()
    wallet.release_hold(session, row, now)  # what the plan did not take
    row.plan_until = now + PLAN_PERIOD


def end_plan_if_over(session: Session, row: InstanceRow, now: datetime) -> bool:
    """A monthly plan whose 30 days are over becomes on demand wherever the row is next seen
    (the metering pass, a state change, a stop, a start). A running instance whose owner chose
    `on_demand` is billed from the plan's end; one whose owner chose `stop` is not billed for
    the moments until it stops (the metering pass stops it). Returns True when it ended now."""
    if row.plan != Plan.MONTHLY.value or row.plan_until is None:
        return False
    ended = as_utc(row.plan_until)
    if ended > now:
        return False
    row.plan = Plan.ON_DEMAND.value
    running = row.status == S.RUNNING.value and row.running_since is None
    if running and row.plan_at_expiry == "on_demand" and row.data_centre is not None:
        fix_price(session, row, pricing.history(session), ended)
        metering.open_usage(row, ended)
    return True


def _refund_unused_plan(session: Session, row: InstanceRow, now: datetime) -> None:
    """The platform lost a prepaid instance: the unused part of the plan goes back as cash
    (pro rata by the second, rounded down)."""
    if not metering.on_plan(row, now) or row.plan_until is None:
        return
    left = (as_utc(row.plan_until) - now) // timedelta(seconds=1)
    paid = pricing.plan_total(metering.price_of(row), row.gpu_count).micros
    refund = paid * left // int(PLAN_PERIOD.total_seconds())
    row.plan_until = now
    if refund > 0:
        ledger.post(
            session,
            f"plan_refund:{row.id}",
            ledger.platform_key("revenue"),
            ledger.user_key(row.owner_id, ledger.CASH),
            Money(refund, row.currency),
            "plan_refund",
            now,
            row.id,
        )
