"""`metering.splits` decides which running instances the metering pass may charge from a plain
tuple: it must be True exactly when `split_at_boundaries` would change the row (close a segment
or reprice it), or the pass would skip a month boundary or a price change."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from cardhour.core.money import Money
from cardhour.core.pricing import PriceHistory, PriceVersion
from cardhour.db.models import InstanceRow
from cardhour.services.billing import metering
from cardhour.store.billing.usage import RunningRow

START = datetime(2026, 1, 31, 23, 58, tzinfo=UTC)  # two minutes before a month boundary
PRICES = [1_900_000, 2_350_000]


def _rows(start: datetime, price: int) -> tuple[RunningRow, InstanceRow]:
    values = {
        "id": "i1",
        "owner_id": "u1",
        "gpu_model": "H100",
        "gpu_count": 2,
        "status": "running",
        "price_micros": price,
        "currency": "CNY",
        "running_since": start,
        "billed_micros": 0,
        "billed_closed_micros": 0,
        "closed_frac": 0,
        "data_centre": "bj1",
        "plan": "on_demand",
        "plan_until": None,
        "charged_at": start,
        "no_gpu": False,
    }
    return RunningRow(**values), InstanceRow(**values, usage_closed=0)


@settings(max_examples=300, deadline=None)
@given(
    offset=st.integers(-400, 0),  # the segment starts this many seconds after START
    elapsed=st.integers(0, 300),
    price=st.sampled_from(PRICES),
    versions=st.lists(
        st.tuples(st.integers(-600, 400), st.sampled_from(PRICES)), min_size=0, max_size=4
    ),
)
def test_splits_is_true_exactly_when_split_at_boundaries_changes_the_row(
    offset: int, elapsed: int, price: int, versions: list[tuple[int, int]]
) -> None:
    start = START + timedelta(seconds=offset)
    now = start + timedelta(seconds=elapsed)
    history = PriceHistory(
        [PriceVersion("H100", "bj1", Money(PRICES[0]), START - timedelta(days=1))]
        + [
            PriceVersion("H100", "bj1", Money(p), START + timedelta(seconds=at))
            for at, p in versions
        ]
    )
    plain, row = _rows(start, price)
    closed = metering.split_at_boundaries(row, now, history)
    changed = bool(closed) or row.price_micros != price
    assert metering.splits(plain, now, history) == changed


def test_a_segment_inside_one_month_at_one_price_does_not_split() -> None:
    start = START - timedelta(hours=1)
    history = PriceHistory(
        [PriceVersion("H100", "bj1", Money(PRICES[0]), START - timedelta(days=1))]
    )
    plain, _ = _rows(start, PRICES[0])
    assert not metering.splits(plain, START, history)
    assert metering.splits(plain, START + timedelta(minutes=2), history)  # past February 1st
