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
from cardhour.core.storage.volumes import storage_cost
from cardhour.db.models import VolumeRow
from cardhour.services.billing import ledger, wallet
from cardhour.store.storage import volumes as store

STORAGE = "storage"  # the transfers' kind, and the "model" credits are checked against


def billed_end(row: VolumeRow, now: datetime) -> datetime:
    """Where the volume's charge ends: its deletion request, else now."""
    return as_utc(row.delete_requested_at) if row.delete_requested_at is not None else now


def cost_until(row: VolumeRow, end: datetime) -> int:
    """The exact (rounded) cost of the volume from its creation to `end`, in micro-units."""
    seconds = max(int((end - as_utc(row.created_at)) // timedelta(seconds=1)), 0)
    return storage_cost(row.size_gb, seconds, row.price_micros)


@dataclass(frozen=True)
class Charged:
    volumes: int = 0
    micros: int = 0


def charge_due(session: Session, now: datetime, every_seconds: int) -> Charged:
    """Charge every volume whose charge is `every_seconds` old or more, or whose deletion was
    asked for and not charged to yet. Locks those volumes (id order), then their owners'
    accounts; a pass with nothing due locks nothing."""

    def owing(row: VolumeRow) -> bool:
        end = billed_end(row, now)
        waited = end - as_utc(row.billed_until)
        asked = row.delete_requested_at is not None
        return waited > timedelta(0) and (asked or waited >= timedelta(seconds=every_seconds))

    candidates = sorted(row.id for row in store.billable(session) if owing(row))
    due = [(row, billed_end(row, now)) for row in store.lock(session, candidates) if owing(row)]
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
