"""Per-second metering: usage from `running` to `stopping`, rated per segment, charged to the
ledger.

A *segment* is a running interval at one price. It ends when the instance leaves `running`, when
the price of its (model, data centre) changes, and at every month boundary (UTC), so a statement
is a sum of whole segments. Invariants, for every instance:
- `billed_closed_micros + closed_frac / 3,600,000` is the exact cost of its finished segments;
- after `settle_rows(now)`: `billed_micros == round_half_up(exact cost of all usage to now)`,
  so an instance's charge is never more than half a micro-unit from its exact cost, however
  often it is settled and whatever its prices were.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.money import MILLI_GPU_SECONDS_PER_CARD_HOUR, ExactCost, Money, rate_micros
from cardhour.core.pricing import PriceHistory
from cardhour.core.states import Plan
from cardhour.db.models import InstanceRow, UsageSegmentRow
from cardhour.services.billing import wallet
from cardhour.services.billing.ledger import Book
from cardhour.services.billing.pricing import history as pricing_history
from cardhour.store.billing import usage as store
from cardhour.store.billing.usage import Rated, RunningRow

ONE_SECOND = timedelta(seconds=1)


def next_month(when: datetime) -> datetime:
    """The first instant of the month after `when` (UTC)."""
    when = when.astimezone(UTC)
    year, month = (when.year + 1, 1) if when.month == 12 else (when.year, when.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)


def metered(row: Rated) -> bool:
    """Billed per second now: running and not inside a prepaid plan."""
    return row.running_since is not None


def open_seconds(row: Rated, now: datetime) -> int:
    """Whole seconds of the open segment (0 when not metered)."""
    if row.running_since is None:
        return 0
    return max((now - as_utc(row.running_since)) // ONE_SECOND, 0)


def cards(row: Rated) -> int:
    """What the row's price is multiplied by: its GPUs; one for a start without GPUs (its
    price is per hour, not per card: `Storage.no_gpu_price`)."""
    return 1 if row.no_gpu else row.gpu_count


def usage_until(row: InstanceRow, now: datetime) -> int:
    """Cumulative metered GPU usage in milli-GPU-seconds up to `now` (reporting; a run without
    GPUs adds none)."""
    return row.usage_closed + open_seconds(row, now) * (0 if row.no_gpu else row.gpu_count) * 1000


def price_of(row: Rated) -> Money:
    return Money(row.price_micros, row.currency)


def hourly_cost(row: Rated) -> Money:
    return price_of(row).times(cards(row))


def cost_of_seconds(row: Rated, seconds: int) -> int:
    """What `seconds` more of the row's cards cost at its price, in micro-units."""
    return rate_micros(row.price_micros, seconds * cards(row) * 1000)


def _closed(row: InstanceRow) -> ExactCost:
    return ExactCost(row.billed_closed_micros, row.closed_frac)


def due(row: Rated, now: datetime) -> int:
    """What the instance owes beyond what was charged, in micro-units (≤ 0: nothing owed).
    Integer arithmetic of `ExactCost.plus_usage(...).rounded()`, inlined: the metering pass
    calls this for every running instance."""
    usage = open_seconds(row, now) * cards(row) * 1000
    whole, frac = divmod(
        row.closed_frac + row.price_micros * usage, MILLI_GPU_SECONDS_PER_CARD_HOUR
    )
    half_up = 1 if 2 * frac >= MILLI_GPU_SECONDS_PER_CARD_HOUR else 0
    return row.billed_closed_micros + whole + half_up - row.billed_micros


def close_segment(row: InstanceRow, end: datetime) -> UsageSegmentRow:
    """End the open segment at `end`: its usage and cost become final. The caller opens the
    next one (or not). Returns the segment's record, not yet added to a session."""
    assert row.running_since is not None
    start = as_utc(row.running_since)
    usage = open_seconds(row, end) * cards(row) * 1000
    before = _closed(row)
    after = before.plus_usage(price_of(row), usage)
    if not row.no_gpu:  # GPU usage; a run without GPUs is billed per hour, no card time
        row.usage_closed += usage
    row.billed_closed_micros, row.closed_frac = after.micros, after.frac
    row.running_since = None
    return UsageSegmentRow(
        instance_id=row.id,
        owner_id=row.owner_id,
        gpu_model=row.gpu_model,
        data_centre=row.data_centre,
        gpu_count=0 if row.no_gpu else row.gpu_count,  # 0: hours without GPUs
        price_micros=row.price_micros,
        currency=row.currency,
        started_at=start,
        ended_at=max(end, start),
        milli_gpu_seconds=usage,
        amount_micros=after.rounded() - before.rounded(),
    )


def split_at_boundaries(
    row: InstanceRow, now: datetime, prices: PriceHistory
) -> list[UsageSegmentRow]:
    """Close the open segment at each month boundary and price change up to `now`, reopening
    at the new price. Returns the closed segments."""
    closed = []
    dc = None if row.no_gpu else row.data_centre  # where the price book's GPU prices apply
    if row.running_since is not None and dc is not None:
        # a change made after the segment began but effective from its very first instant
        start = as_utc(row.running_since)
        at_start = prices.version_at(row.gpu_model, dc, start)
        if at_start is not None and at_start.effective_from == start:
            row.price_micros = at_start.price.micros
    while row.running_since is not None:
        start = as_utc(row.running_since)
        boundary = next_month(start)
        change = None
        if dc is not None:
            change = prices.next_change(row.gpu_model, dc, start, now)
        if change is not None and change.effective_from < boundary:
            boundary = change.effective_from
        if boundary > now:
            break
        closed.append(close_segment(row, boundary))
        row.running_since = boundary
        if change is not None and change.effective_from == boundary:
            row.price_micros = change.price.micros  # a month boundary keeps the price
    return closed


def splits(row: RunningRow, now: datetime, prices: PriceHistory) -> bool:
    """Whether `split_at_boundaries(row, now, prices)` would change the row: a month boundary
    or a price change since its segment began, or a price set later but effective from the
    segment's very start."""
    if row.running_since is None:
        return False
    start = as_utc(row.running_since)
    if next_month(start) <= now:
        return True
    if row.data_centre is None or row.no_gpu:
        return False
    at_start = prices.version_at(row.gpu_model, row.data_centre, start)
    repriced = at_start is not None and at_start.effective_from == start
    if repriced and at_start is not None and at_start.price.micros != row.price_micros:
        return True
    return prices.next_change(row.gpu_model, row.data_centre, start, now) is not None


def settle_rows(
    session: Session,
    book: Book,
    rows: Sequence[InstanceRow | RunningRow],
    now: datetime,
    prices: PriceHistory,
) -> dict[str, int]:
    """Bring every row's charge up to `now`, in the order given: split the segments of ORM rows,
    then charge what each owes (grant hours, hold, credits, cash). A `RunningRow` (a plain
    tuple, the metering pass's common case) must be one `splits` found nothing to split in.
    `book` must hold the owners' accounts and revenue. Returns micro-units charged per instance
    id. The caller flushes the book."""
    charged: dict[str, int] = {}
    for row in rows:
        if isinstance(row, InstanceRow):
            for segment in split_at_boundaries(row, now, prices):
                session.add(segment)
        amount = due(row, now)
        if amount > 0:
            wallet.charge(book, row, amount, f"usage:{row.id}:{row.billed_micros}", "usage")
        charged[row.id] = max(amount, 0)
    store.save_charges(session, [(r, r.billed_micros + charged[r.id], now) for r in rows])
    return charged


def settle(session: Session, row: InstanceRow, now: datetime) -> int:
    """Charge one instance up to `now` in its own lock scope (its owner's accounts and revenue).
    Returns the micro-units charged."""
    book = wallet.open_wallet(session, now, [row.owner_id], ["revenue"])
    charged = settle_rows(session, book, [row], now, pricing_history(session))[row.id]
    book.flush()
    session.flush()
    return charged


def close_usage(session: Session, row: InstanceRow, now: datetime, prices: PriceHistory) -> None:
    """The instance leaves `running`: charge it to `now` and end its segment there."""
    if row.running_since is None:
        return
    book = wallet.open_wallet(session, now, [row.owner_id], ["revenue"])
    settle_rows(session, book, [row], now, prices)
    book.flush()
    session.add(close_segment(row, now))
    session.flush()


def open_usage(row: InstanceRow, now: datetime) -> None:
    row.running_since = now
    row.charged_at = now


def on_plan(row: InstanceRow, now: datetime) -> bool:
    """Inside a prepaid monthly plan at `now`."""
    return (
        row.plan == Plan.MONTHLY.value
        and row.plan_until is not None
        and as_utc(row.plan_until) > now
    )
