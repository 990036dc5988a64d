"""The readiness SLA: a request to run an instance (a launch, a start) that is not `ready`
within the catalog's `sla_ready_within_seconds` (900 by default) gets its waiting time back.

Rule (docs/dev/readiness.md): when the instance turns ready at `t` after the request at `r`
and `t − r` exceeds the window, the owner gets an SLA credit worth the whole wait, `t − r`
whole seconds × its GPUs × its price per card-hour, rated like usage (half up to the
micro-unit). The credit (kind `sla_credit`: spent before cash, after grants) is keyed by the
instance and the request's instant, so one request is credited once whatever retries; an
event on the instance says what was credited. A node replaced by the platform does not restart
the clock. A request given up before it is ready (stopped, terminated, failed) gets nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.money import Money, rate_micros
from cardhour.db.models import InstanceRow
from cardhour.services import ledger
from cardhour.services.instances import note


def settle_ready(
    session: Session, row: InstanceRow, now: datetime, window_seconds: int
) -> Money | None:
    """The instance is ready at `now`: credit the wait if the SLA was missed, close the
    request. Returns the credit, or None."""
    if row.requested_at is None:
        return None
    requested = as_utc(row.requested_at)
    row.requested_at = None
    waited = (now - requested) // timedelta(seconds=1)
    if waited <= window_seconds:
        return None
    amount = Money(rate_micros(row.price_micros, waited * row.gpu_count * 1000), row.currency)
    if amount.micros <= 0:
        return None
    credit_id = f"sla-{row.id}-{int(requested.timestamp())}"
    grant = ledger.CreditGrant(ledger.SLA, amount, credit_id, ref=row.id)
    ledger.grant_credit(session, row.owner_id, grant, now)
    minutes, seconds = divmod(waited, 60)
    note(
        session,
        row,
        now,
        f"SLA: ready {minutes} min {seconds} s after the request (more than "
        f"{window_seconds // 60} min): {amount.display()} {amount.currency} credited",
    )
    return amount
