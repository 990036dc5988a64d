"""What each instance should have been charged, worked out without the billing code.

Only fractions, datetimes and the instance's state events: the running intervals come from the
`instance_events` rows (entering `running` → leaving it), the prices from the versions the test
itself wrote (the fleet file's first, effective since the epoch). Each interval is cut at every
price change of its (model, data centre) and at every month boundary (UTC), and each piece costs
whole seconds × cards × price in force at its start / 3,600.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from fractions import Fraction

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
PLAN_DAYS = 30
PLAN_HOURS = 24 * PLAN_DAYS
RUNNING = "running"


def next_month(when: datetime) -> datetime:
    year, month = (when.year + 1, 1) if when.month == 12 else (when.year, when.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)


def half_up(value: Fraction) -> int:
    """Round a non-negative amount half up to a whole micro-unit."""
    return int(value + Fraction(1, 2))


def monthly(on_demand_micros: int, discount_percent: int) -> int:
    """Per card-hour on the monthly plan: the on-demand price less the discount, half up."""
    return half_up(Fraction(on_demand_micros * (100 - discount_percent), 100))


@dataclass
class PriceBook:
    """Every on-demand price version per (model, data centre), in the order they were set."""

    # (effective from, micro-units per card-hour, the step of the test that set it)
    versions: dict[tuple[str, str], list[tuple[datetime, int, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    size: int = 0  # versions added so far

    def add(self, model: str, dc: str, effective_from: datetime, micros: int, step: int) -> None:
        self.versions[(model, dc)].append((effective_from, micros, step))
        self.size += 1

    def at(self, model: str, dc: str, when: datetime, set_before: int | None = None) -> int:
        """The latest-starting version in force at `when`; of two starting at the same instant,
        the one set last. `set_before`: only versions set before that step of the test."""
        best: tuple[datetime, int] | None = None
        for start, micros, step in self.versions[(model, dc)]:
            if set_before is not None and step >= set_before:
                continue
            if start <= when and (best is None or start >= best[0]):
                best = (start, micros)
        assert best is not None, f"no price for {model} in {dc} at {when}"
        return best[1]

    def highest(self, model: str, dcs: Iterable[str], when: datetime) -> int:
        return max(self.at(model, dc, when) for dc in dcs)

    def dearest_ever(self, model: str) -> int:
        return max(m for (mod, _), vs in self.versions.items() if mod == model for _, m, _ in vs)

    def cost(self, model: str, dc: str, cards: int, start: datetime, end: datetime) -> Fraction:
        """Exact cost of `cards` running from `start` to `end` (whole seconds), in micro-units."""
        if end <= start:
            return Fraction(0)
        cuts = {start, end} | {t for t, _, _ in self.versions[(model, dc)] if start < t < end}
        boundary = next_month(start)
        while boundary < end:
            cuts.add(boundary)
            boundary = next_month(boundary)
        points = sorted(cuts)
        total = Fraction(0)
        for a, b in zip(points, points[1:], strict=False):
            seconds = (b - a) // timedelta(seconds=1)
            total += Fraction(seconds * cards * self.at(model, dc, a), 3600)
        return total


@dataclass(frozen=True)
class Event:
    at: datetime
    from_status: str | None
    to_status: str


@dataclass(frozen=True)
class Interval:
    start: datetime
    end: datetime | None  # None: still running
    attempt: int  # which placement it ran on (1 = the first)


@dataclass(frozen=True)
class History:
    intervals: list[Interval]
    placed_at: dict[int, datetime]  # attempt -> when it entered provisioning


def history(events: Sequence[Event]) -> History:
    """Running intervals and placements from one instance's events, in order. Events that stay
    in a status (warnings, a plan turning on-demand) neither start nor end an interval."""
    intervals: list[Interval] = []
    placed_at: dict[int, datetime] = {}
    start: datetime | None = None
    attempt = 0
    for e in events:
        if e.from_status == e.to_status:
            continue
        if e.to_status == "provisioning":
            attempt += 1
            placed_at[attempt] = e.at
        if e.to_status == RUNNING:
            start = e.at
        elif e.from_status == RUNNING:
            assert start is not None, "left running without entering it"
            intervals.append(Interval(start, e.at, attempt))
            start = None
    if start is not None:
        intervals.append(Interval(start, None, attempt))
    return History(intervals, placed_at)


def billable(h: History, plan: str, at_expiry: str | None) -> list[Interval]:
    """The intervals billed per second. Monthly: nothing inside the 30 days from the first run;
    after them, with `on_demand` at expiry, from their end on; with `stop`, the run that was
    under way when they ended is not billed past their end (the platform stopped it), later
    runs are billed in full."""
    if plan != "monthly" or not h.intervals:
        return h.intervals
    until = h.intervals[0].start + timedelta(days=PLAN_DAYS)
    out = []
    for iv in h.intervals:
        if iv.end is not None and iv.end <= until:
            continue
        if iv.start >= until:
            out.append(iv)
        elif at_expiry == "on_demand":
            out.append(Interval(until, iv.end, iv.attempt))
    return out


def usage_cost(
    book: PriceBook,
    model: str,
    cards: int,
    intervals: Sequence[Interval],
    dc_of: dict[int, str],
    metered_to: datetime,
) -> Fraction:
    """Exact cost of `intervals`, an open one counted up to `metered_to` (the last metering)."""
    total = Fraction(0)
    for iv in intervals:
        end = iv.end if iv.end is not None else max(metered_to, iv.start)
        total += book.cost(model, dc_of[iv.attempt], cards, iv.start, end)
    return total
