"""The metering pass: charge running instances on a cadence, stop those whose owner ran out.

Charges are posted at most every `charge_every_seconds` per instance (and always when an instance
leaves `running`), so the ledger gets one transfer per instance per interval, not per second.
The auto-stop check counts usage not yet posted, so it is as prompt as the tick.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
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


def meter_and_autostop(
    session: Session, now: datetime, margin_seconds: int, charge_every_seconds: int = 0
) -> MeteringResult:
    """Settle running instances whose last charge is `charge_every_seconds` old; then, per owner,
    if the balance less what is owed but not yet posted no longer covers `margin_seconds` of
    their running instances, switch those to `stopping` (which settles them; billing ends)."""
    result = MeteringResult()
    every = timedelta(seconds=charge_every_seconds)
    by_owner: dict[str, list[InstanceRow]] = defaultdict(list)
    for row in store.list_in_status(session, [InstanceStatus.RUNNING.value], lock=True):
        if row.charged_at is None or now - as_utc(row.charged_at) >= every:
            result.charged[row.id] = metering.settle(session, row, now)
        by_owner[row.owner_id].append(row)
    for owner_id, rows in by_owner.items():
        currency = rows[0].currency
        owed = sum((max(metering.due(r, now).micros, 0) for r in rows), 0)
        margin = sum(
            rate_usage(metering.price_of(r), margin_seconds * r.gpu_count * 1000).micros
            for r in rows
        )
        if ledger.balance(session, owner_id, currency).total.micros - owed > margin:
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
