"""The metering pass: charge every running instance, stop those whose owner ran out of money."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from cardhour.core.money import Money, rate_usage
from cardhour.core.states import InstanceStatus
from cardhour.db.models import InstanceRow
from cardhour.services import ledger, metering
from cardhour.services.instances import switch_status
from cardhour.store import instances as store


@dataclass
class MeteringResult:
    charged: dict[str, Money] = field(default_factory=dict)  # instance id -> charged this pass
    stopped: list[str] = field(default_factory=list)


def meter_and_autostop(session: Session, now: datetime, margin_seconds: int) -> MeteringResult:
    """Settle every running instance; then, per owner, if the balance no longer covers
    `margin_seconds` of their running instances, switch those to `stopping` (billing ends now)."""
    result = MeteringResult()
    by_owner: dict[str, list[InstanceRow]] = defaultdict(list)
    for row in store.list_in_status(session, [InstanceStatus.RUNNING.value], lock=True):
        result.charged[row.id] = metering.settle(session, row, now)
        by_owner[row.owner_id].append(row)
    for owner_id, rows in by_owner.items():
        currency = rows[0].currency
        margin = sum(
            (rate_usage(metering.price_of(r), margin_seconds * r.gpu_count * 1000) for r in rows),
            Money.zero(currency),
        )
        if ledger.balance(session, owner_id, currency).total.micros > margin.micros:
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
    session.flush()
    return result
