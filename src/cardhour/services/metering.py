"""Per-second metering: usage from `running` to `stopping`, rated cumulatively, charged to the
ledger.

Invariant: `row.billed_micros == rate_usage(price, usage counted so far)`, so an instance is never
charged more than half a micro-unit away from its exact cost, however often it is metered.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.money import Money, rate_usage
from cardhour.db.models import InstanceRow
from cardhour.services import ledger

ONE_SECOND = timedelta(seconds=1)


def open_seconds(row: InstanceRow, now: datetime) -> int:
    """Whole seconds since the instance started running (0 when not running)."""
    if row.running_since is None:
        return 0
    return max((now - as_utc(row.running_since)) // ONE_SECOND, 0)


def usage_until(row: InstanceRow, now: datetime) -> int:
    """Cumulative usage in milli-GPU-seconds up to `now`."""
    return row.usage_closed + open_seconds(row, now) * row.gpu_count * 1000


def price_of(row: InstanceRow) -> Money:
    return Money(row.price_micros, row.currency)


def settle(session: Session, row: InstanceRow, now: datetime) -> Money:
    """Charge what the instance used since its last charge; returns the amount charged now."""
    total = rate_usage(price_of(row), usage_until(row, now))
    due = total.micros - row.billed_micros
    if due <= 0:
        return Money.zero(row.currency)
    ledger.charge_usage(
        session,
        row.owner_id,
        Money(due, row.currency),
        f"usage:{row.id}:{row.billed_micros}",
        now,
        ref=row.id,
    )
    row.billed_micros = total.micros
    session.flush()
    return Money(due, row.currency)


def close_usage(session: Session, row: InstanceRow, now: datetime) -> None:
    """The instance leaves `running`: charge to `now` and stop the meter."""
    settle(session, row, now)
    row.usage_closed = usage_until(row, now)
    row.running_since = None
    session.flush()


def open_usage(row: InstanceRow, now: datetime) -> None:
    row.running_since = now


def hourly_cost(row: InstanceRow) -> Money:
    return price_of(row).times(row.gpu_count)
