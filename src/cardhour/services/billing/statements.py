"""Monthly statements: what an account used in a calendar month (UTC), what it was charged, how
that was paid, and how its balance moved (docs/dev/statements.md).

Two clocks, on purpose:
- **Usage lines are usage *in* the month** (accrual): the usage segments that started in it
  (metering splits segments at every month boundary, so each lies inside one month) plus, while
  an instance runs, its open segment up to `now`, split the same way. A line is one instance at
  one price; its amount is what those segments add to the instance's charge, so the lines of an
  instance over all months sum to exactly what the ledger charges it.
- **Ledger movements are what was *posted* in the month**: transfers with `created_at` in it.
  Usage is posted on a cadence (about a minute), so the last minute of a month is usually posted
  in the next one, and the current month's usage lines include usage not posted yet.
  Plan lines are the `plan`/`plan_refund` transfers posted in the month.
- **Storage lines are volumes kept *in* the month** (accrual, like usage): one per volume, the
  GB-seconds from its creation (or the month's start) to its deletion request (or the month's
  end, or `now`), `services.storage.charges.storage_lines`; a volume's lines over all months
  sum to exactly what the ledger charges it.

Balances (cash, credits, held) are recomputed from the transfers posted before the month's start
(opening) and before its end (closing; for the month in progress that is "now"), and
`opening + movements == closing` on the total (holds move money between the user's own accounts,
so they change the parts, never the total).

Paid from: each `usage` or `plan` transfer posted in the month counts against the account it
came from. What an instance's hold pays counts against the accounts that funded the hold, taken
in the wallet's spending order (credits by priority, soonest expiry, then cash), as
`wallet.release_hold` documents (it gives back what is left from the other end), so
`sum(paid_from) == usage_charged + plan_charged + storage_charged` every month (storage is
drawn directly from credits and cash, never from a hold).
"""

from __future__ import annotations

import csv
import io
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal

from sqlalchemy import inspect
from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.errors import InvalidInput
from cardhour.core.money import CARD_TIME_UNIT, ExactCost, Money
from cardhour.db import snapshot
from cardhour.db.models import InstanceRow
from cardhour.services.billing import metering, pricing
from cardhour.services.billing import statement_ledger as book
from cardhour.services.billing.ledger import CASH
from cardhour.services.billing.statement_ledger import (
    PLAN,
    PLAN_REFUND,
    USAGE,
    Balances,
    Movements,
    PlanLine,
)
from cardhour.services.storage.charges import StorageLine, storage_lines
from cardhour.store.billing import ledger as ledger_store
from cardhour.store.billing import statements as store

_MONTH = re.compile(r"(\d{4})-(\d{2})")


def parse_month(text: str) -> datetime:
    """The first instant (UTC) of the month `YYYY-MM`; InvalidInput for anything else."""
    match = _MONTH.fullmatch(text.strip())
    year, month = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    if not (1 <= month <= 12 and year >= 1):
        raise InvalidInput(f"bad month {text[:20]!r}: expected YYYY-MM, e.g. 2026-01")
    return datetime(year, month, 1, tzinfo=UTC)


def month_of(when: datetime) -> str:
    return f"{when.astimezone(UTC):%Y-%m}"


def previous_month(month: str) -> str:
    start = parse_month(month)
    year, mon = (start.year - 1, 12) if start.month == 1 else (start.year, start.month - 1)
    return f"{year:04d}-{mon:02d}"


@dataclass(frozen=True)
class UsageLine:
    """One instance at one price in the month."""

    instance_id: str
    instance_name: str
    gpu_model: str
    data_centre: str | None
    gpu_count: int
    card_seconds: int
    price: Money  # per card-hour
    amount: Money
    started_at: datetime  # first second counted in the month
    ended_at: datetime  # last; `now` for a running instance
    running: bool  # includes the open segment: usage to `now`, not final


@dataclass(frozen=True)
class Statement:
    user_id: str
    month: str  # "YYYY-MM"
    currency: str
    period_start: datetime
    period_end: datetime  # the next month's start, or `now` while the month runs
    complete: bool  # the month is over (its usage lines are final)
    usage_lines: list[UsageLine]
    plan_lines: list[PlanLine]
    opening: Balances
    closing: Balances
    movements: Movements
    paid_from: dict[str, Money]  # credit kinds and "cash"; sums to `charged`
    generated_at: datetime
    # usage of the owner's instances that team grants paid, posted in the month: its worth (not
    # in `charged`, which is what the owner's own accounts paid) and the card time it took
    paid_by_grants: Money | None = None
    grant_milli_gpu_seconds: int = 0
    storage_lines: list[StorageLine] = field(default_factory=list)  # volumes kept in the month

    @property
    def usage_total(self) -> Money:
        return sum((line.amount for line in self.usage_lines), Money.zero(self.currency))

    @property
    def plan_total(self) -> Money:
        return sum((line.amount for line in self.plan_lines), Money.zero(self.currency))

    @property
    def storage_total(self) -> Money:
        return sum((line.amount for line in self.storage_lines), Money.zero(self.currency))

    @property
    def total(self) -> Money:
        """Usage and storage in the month plus plan charges less refunds posted in it."""
        return self.usage_total + self.plan_total + self.storage_total

    @property
    def charged(self) -> Money:
        """Usage, plan and storage charges posted in the month (what `paid_from` splits)."""
        m = self.movements
        return -(m.usage_charged + m.plan_charged + m.storage_charged)

    @property
    def credits_used(self) -> Money:
        return sum((v for k, v in self.paid_from.items() if k != CASH), Money.zero(self.currency))

    @property
    def cash_used(self) -> Money:
        return self.paid_from.get(CASH, Money.zero(self.currency))


def read_one_snapshot(session: Session) -> None:
    """Make the caller's transaction read one snapshot, so the figures agree with each other
    while metering commits (call it first, before any query of the transaction)."""
    snapshot.read_one_snapshot(session)


def statement(
    session: Session, user_id: str, month: str, now: datetime, currency: str
) -> Statement:
    """The statement of `user_id` for `month` ("YYYY-MM", UTC) as of `now`.

    Raises InvalidInput for a malformed month or one that has not started. A month before the
    account existed is an empty statement with zero balances."""
    start = parse_month(month)
    if start > now:
        raise InvalidInput(f"month {month} has not started yet (it is {month_of(now)} now)")
    end = metering.next_month(start)
    accounts = {a.id: a for a in ledger_store.owned_accounts(session, user_id)}
    lines = _usage_lines(session, user_id, start, end, now, currency)
    transfers = ledger_store.list_transfers_between(session, list(accounts), start, end)
    grants = store.grant_payments(session, user_id, start, end)
    names = store.instances_by_id(
        session, user_id, [t.ref for t in transfers if t.kind in (PLAN, PLAN_REFUND) and t.ref]
    )
    return Statement(
        user_id=user_id,
        month=month_of(start),
        currency=currency,
        period_start=start,
        period_end=min(end, now),
        complete=now >= end,
        usage_lines=lines,
        plan_lines=book.plan_lines(transfers, accounts, names, currency),
        opening=book.balances(session, accounts, start, currency),
        closing=book.balances(session, accounts, end, currency),
        movements=book.movements(transfers, accounts, currency),
        paid_from=book.paid_from(session, transfers, accounts, start, end, currency),
        generated_at=now,
        paid_by_grants=Money(grants.get(currency, 0), currency),
        grant_milli_gpu_seconds=grants.get(CARD_TIME_UNIT, 0),
        storage_lines=storage_lines(session, user_id, start, end, now),
    )


# usage ------------------------------------------------------------------------------------


@dataclass
class _Piece:
    instance_id: str
    gpu_model: str
    data_centre: str | None
    gpu_count: int
    price_micros: int
    started_at: datetime
    ended_at: datetime
    milli_gpu_seconds: int
    amount_micros: int
    running: bool = False


def _detached(row: InstanceRow) -> InstanceRow:
    """A copy of the row outside any session, for metering's splitting (never flushed)."""
    columns = inspect(InstanceRow).column_attrs
    return InstanceRow(**{c.key: getattr(row, c.key) for c in columns})


def _open_pieces(row: InstanceRow, now: datetime, prices: pricing.PriceHistory) -> list[_Piece]:
    """The open segment of a running instance up to `now`, split as metering will split it."""
    copy = _detached(row)
    pieces = [
        _Piece(s.instance_id, s.gpu_model, s.data_centre, s.gpu_count, s.price_micros,
               as_utc(s.started_at), as_utc(s.ended_at), s.milli_gpu_seconds, s.amount_micros,
               running=True)
        for s in metering.split_at_boundaries(copy, now, prices)
    ]  # fmt: skip
    assert copy.running_since is not None
    usage = metering.open_seconds(copy, now) * metering.cards(copy) * 1000
    before = ExactCost(copy.billed_closed_micros, copy.closed_frac)
    amount = before.plus_usage(metering.price_of(copy), usage).rounded() - before.rounded()
    pieces.append(
        _Piece(copy.id, copy.gpu_model, copy.data_centre, 0 if copy.no_gpu else copy.gpu_count,
               copy.price_micros, as_utc(copy.running_since), now, usage, amount, running=True)
    )  # fmt: skip
    return pieces


def _usage_lines(
    session: Session, user_id: str, start: datetime, end: datetime, now: datetime, currency: str
) -> list[UsageLine]:
    pieces = [
        _Piece(s.instance_id, s.gpu_model, s.data_centre, s.gpu_count, s.price_micros,
               as_utc(s.started_at), as_utc(s.ended_at), s.milli_gpu_seconds, s.amount_micros)
        for s in store.segments_started_between(session, user_id, start, end)
    ]  # fmt: skip
    running = store.metered_instances(session, user_id)
    if running:
        prices = pricing.history(session)
        for row in running:
            pieces += [p for p in _open_pieces(row, now, prices) if start <= p.started_at < end]
    groups: dict[tuple[str, str, str | None, int, int], list[_Piece]] = defaultdict(list)
    for p in pieces:
        key = (p.instance_id, p.gpu_model, p.data_centre, p.gpu_count, p.price_micros)
        groups[key].append(p)
    names = store.instances_by_id(session, user_id, [k[0] for k in groups])
    lines = []
    for (instance_id, model, dc, count, price), group in groups.items():
        milli = sum(p.milli_gpu_seconds for p in group)
        amount = sum(p.amount_micros for p in group)
        if milli == 0 and amount == 0:
            continue
        instance = names.get(instance_id)
        lines.append(
            UsageLine(
                instance_id=instance_id,
                instance_name=instance.name if instance is not None else instance_id,
                gpu_model=model,
                data_centre=dc,
                gpu_count=count,
                card_seconds=milli // 1000,
                price=Money(price, currency),
                amount=Money(amount, currency),
                started_at=min(p.started_at for p in group),
                ended_at=max(p.ended_at for p in group),
                running=any(p.running for p in group),
            )
        )
    return sorted(lines, key=lambda x: (x.instance_name, x.instance_id, x.started_at))


# CSV --------------------------------------------------------------------------------------

CSV_COLUMNS = (
    "month", "type", "description", "instance_id", "instance_name", "gpu_model", "data_centre",
    "gpu_count", "card_seconds", "rate_per_card_hour", "amount", "currency", "volume_id",
    "volume_name", "size_gb", "gb_seconds", "rate_per_gb_hour",
)  # fmt: skip


def to_csv(st: Statement) -> str:
    """One header row, then one row per figure (docs/dev/statements.md lists the types).

    Amounts have six decimals, so the rows of one type sum exactly to their total row."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)

    def row(kind: str, description: str, amount: Money, **cells: object) -> None:
        values = {"month": st.month, "type": kind, "description": description,
                  "amount": amount.exact_str(), "currency": st.currency, **cells}  # fmt: skip
        writer.writerow(["" if values.get(c) is None else values.get(c) for c in CSV_COLUMNS])

    for u in st.usage_lines:
        row(USAGE, "running (to now)" if u.running else "", u.amount, instance_id=u.instance_id,
            instance_name=u.instance_name, gpu_model=u.gpu_model, data_centre=u.data_centre,
            gpu_count=u.gpu_count, card_seconds=u.card_seconds,
            rate_per_card_hour=u.price.exact_str())  # fmt: skip
    for p in st.plan_lines:
        row(p.kind, f"posted {p.posted_at:%Y-%m-%d %H:%M:%S} UTC", p.amount,
            instance_id=p.instance_id, instance_name=p.instance_name, gpu_model=p.gpu_model,
            gpu_count=p.gpu_count)  # fmt: skip
    for v in st.storage_lines:
        row("storage", "kept (to now)" if v.kept else "", v.amount, volume_id=v.volume_id,
            volume_name=v.volume_name, data_centre=v.data_centre, size_gb=v.size_gb,
            gb_seconds=v.gb_seconds, rate_per_gb_hour=v.price.exact_str())  # fmt: skip
    row("usage_total", "usage in the month", st.usage_total)
    row("plan_total", "plan charges less refunds posted in the month", st.plan_total)
    row("storage_total", "volumes kept in the month", st.storage_total)
    row("total", "usage_total + plan_total + storage_total", st.total)
    for kind, amount in st.paid_from.items():
        row("paid_from", kind, amount)
    row("charged", "usage, plan and storage charges posted in the month", st.charged)
    if st.paid_by_grants is not None and st.paid_by_grants.micros:
        row("paid_by_grants", f"{st.grant_milli_gpu_seconds / 3_600_000:.3f} card-hours of "
            "team grants (not in charged)", st.paid_by_grants)  # fmt: skip
    for part in ("cash", "credits", "held"):
        row("opening_balance", part, getattr(st.opening, part))
    row("opening_balance", "total", st.opening.total)
    for name, amount in st.movements.items():
        row("movement", name, amount)
    for part in ("cash", "credits", "held"):
        row("closing_balance", part, getattr(st.closing, part))
    row("closing_balance", "total", st.closing.total)
    return buffer.getvalue()


def card_hours(card_seconds: int) -> str:
    """Card-seconds as card-hours with up to four decimals, for people."""
    hours = (Decimal(card_seconds) / 3600).quantize(Decimal("0.0001"), ROUND_HALF_UP)
    text = f"{hours:,}".rstrip("0").rstrip(".")
    return text or "0"
