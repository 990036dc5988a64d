"""Per-second metering: usage from `running` to `stopping`, rated per running interval, charged to
the ledger.

A running interval (a *segment*) has one price: the one fixed when the instance was placed.
Invariants, for every instance:
- `billed_closed_micros` is what the finished segments cost, final;
- after `settle(now)`: `billed_micros == billed_closed_micros + rate_usage(price, open usage)`,
  so the charge for a segment is never more than half a micro-unit from its exact cost, however
  often it is settled, and a restart at another price never re-rates earlier segments.
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
    """Whole seconds of the running segment (0 when not running)."""
    if row.running_since is None:
        return 0
    return max((now - as_utc(row.running_since)) // ONE_SECOND, 0)


def usage_until(row: InstanceRow, now: datetime) -> int:
    """Cumulative usage in milli-GPU-seconds up to `now` (reporting)."""
    return row.usage_closed + open_seconds(row, now) * row.gpu_count * 1000


def price_of(row: InstanceRow) -> Money:
    return Money(row.price_micros, row.currency)


def due(row: InstanceRow, now: datetime) -> Money:
    """What the instance owes beyond what was charged (≤ 0 when nothing is owed)."""
    segment = rate_usage(price_of(row), open_seconds(row, now) * row.gpu_count * 1000)
    return Money(row.billed_closed_micros + segment.micros - row.billed_micros, row.currency)


def settle(session: Session, row: InstanceRow, now: datetime) -> Money:
    """Charge what the instance used since its last charge; returns the amount charged now."""
    amount = due(row, now)
    row.charged_at = now
    if amount.micros <= 0:
        return Money.zero(row.currency)
    ledger.charge_usage(
        session, row.owner_id, amount, f"usage:{row.id}:{row.billed_micros}", now, ref=row.id
    )
    row.billed_micros += amount.micros
    session.flush()
    return amount


def close_usage(session: Session, row: InstanceRow, now: datetime) -> None:
    """The instance leaves `running`: charge the segment to `now` and make it final."""
    settle(session, row, now)
    row.usage_closed = usage_until(row, now)
    row.billed_closed_micros = row.billed_micros
    row.running_since = None
    session.flush()


def open_usage(row: InstanceRow, now: datetime) -> None:
    row.running_since = now
    row.charged_at = now


def hourly_cost(row: InstanceRow) -> Money:
    return price_of(row).times(row.gpu_count)
