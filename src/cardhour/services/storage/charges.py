"""What volumes cost: each volume is charged on a cadence for the GB-hours it was kept, from
its creation to its deletion (the owner's request), through the ledger (docs/dev/storage.md).

Invariant, for every volume: after `charge_due(now)` with nothing skipped,
`billed_micros == storage_cost(size_gb, whole seconds from created_at to billed_until,
price_micros)`: the cumulative time is rated (half up to the micro-unit), as usage is, so the
charge never strays half a micro-unit from the exact cost. Each charge is one transfer per
source, `storage` kind, ref the volume id, id `storage:<volume id>:<billed after>` (posting one
again is a primary-key conflict: the transaction that would charge twice rolls back). The
owner's credits that are not tied to GPU models pay first, cash takes the rest even below zero
(the storage was kept), as usage does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.money import Money
from cardhour.core.storage.volumes import storage_cost
from cardhour.db.models import VolumeRow
from cardhour.services.billing import ledger, statement_ledger, wallet
from cardhour.store.storage import volumes as store

STORAGE = statement_ledger.STORAGE  # the transfers' kind; credits are checked against it as a
# GPU model: only credits not tied to GPU models pay for storage


def spendable(session: Session, owner_id: str, currency: str, now: datetime) -> Money:
    """What can pay for the owner's storage now: cash and the credits not tied to GPU models
    (`wallet.draw` spends no other for storage)."""
    balance = wallet.balance(session, owner_id, currency, now)
    credits = [c.balance for c in balance.credits if not c.gpu_models and not c.expired]
    return sum(credits, balance.cash)


def billed_end(row: VolumeRow, now: datetime) -> datetime:
    """Where the volume's charge ends: its deletion request, else now."""
    return as_utc(row.delete_requested_at) if row.delete_requested_at is not None else now


def _seconds(row: VolumeRow, end: datetime) -> int:
    """Whole seconds from the volume's creation to `end`."""
    return max(int((end - as_utc(row.created_at)) // timedelta(seconds=1)), 0)


def cost_until(row: VolumeRow, end: datetime) -> int:
    """The exact (rounded) cost of the volume from its creation to `end`, in micro-units."""
    return storage_cost(row.size_gb, _seconds(row, end), row.price_micros)


@dataclass(frozen=True)
class Charged:
    volumes: int = 0
    micros: int = 0


def charge_due(session: Session, now: datetime, every_seconds: int) -> Charged:
    """Charge every volume whose charge is `every_seconds` old or more, or whose deletion was
    asked for and not charged to yet. Locks those volumes (id order), then their owners'
    accounts; a pass with nothing due locks nothing."""
    every = timedelta(seconds=every_seconds)

    def owing(row: VolumeRow) -> bool:
        end = billed_end(row, now)
        waited = end - as_utc(row.billed_until)
        asked = row.delete_requested_at is not None
        return waited > timedelta(0) and (asked or waited >= every)

    due_ids = sorted(row.id for row in store.billable(session, now - every) if owing(row))
    due = [(row, billed_end(row, now)) for row in store.lock(session, due_ids) if owing(row)]
    if not due:
        return Charged()
    revenue = ledger.platform_key("revenue")
    book = ledger.open_book(session, now, [revenue], sorted({r.owner_id for r, _ in due}))
    total = 0
    for row, end in due:
        amount = cost_until(row, end) - row.billed_micros
        if amount > 0:
            wallet.draw(
                book,
                row.owner_id,
                STORAGE,
                amount,
                revenue,
                f"storage:{row.id}:{row.billed_micros}",
                STORAGE,
                row.id,
                overdraft=True,
            )
            row.billed_micros += amount
            total += amount
        row.billed_until = end
    book.flush()
    session.flush()
    return Charged(len(due), total)


@dataclass(frozen=True)
class StorageLine:
    """One volume kept in a month: what that time adds to its charge (the statement's line)."""

    volume_id: str
    volume_name: str
    data_centre: str
    size_gb: int
    gb_seconds: int
    price: Money  # per GB-hour
    amount: Money
    started_at: datetime  # the first second counted in the month
    ended_at: datetime  # the last; `now` for a volume still kept
    kept: bool  # still kept: the line grows until it is deleted or the month ends


def storage_lines(
    session: Session, owner_id: str, start: datetime, end: datetime, now: datetime
) -> list[StorageLine]:
    """The owner's volumes kept in [start, end), up to `now`. A line's amount is the cost to
    its last second less the cost to its first (both rated on the cumulative time), so a
    volume's lines over all months add up to exactly what it is charged in all."""
    lines = []
    for row in store.kept_between(session, owner_id, start, end):
        first = max(as_utc(row.created_at), start)
        last = min(billed_end(row, now), end, now)
        if last <= first:
            continue
        amount = cost_until(row, last) - cost_until(row, first)
        seconds = _seconds(row, last) - _seconds(row, first)
        lines.append(
            StorageLine(
                volume_id=row.id,
                volume_name=row.name,
                data_centre=row.data_centre,
                size_gb=row.size_gb,
                gb_seconds=seconds * row.size_gb,
                price=Money(row.price_micros, row.currency),
                amount=Money(amount, row.currency),
                started_at=first,
                ended_at=last,
                kept=row.delete_requested_at is None and last == now,
            )
        )
    return sorted(lines, key=lambda x: (x.volume_name, x.volume_id, x.started_at))
