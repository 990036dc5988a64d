"""The readiness SLA: a request to run an instance (a launch, a start) that is not `ready`
within its SLA window gets its waiting time back.

Rule (docs/dev/readiness.md): the window is the catalog's `sla_ready_within_seconds` (900 by
default) in force when the instance was launched (`instances.sla_seconds`). A request made at
`r` that ends at `t` — the instance turns ready (`settle_ready`), or the request is given up:
stopped, terminated, or failed by the platform (`settle_given_up`) — after more than the window
gets an SLA credit worth the whole wait, `t − r` whole seconds × its GPUs × its price per
card-hour, rated like usage (half up to the micro-unit). A request its owner gives up (a stop, a
terminate) gets at most the window's worth: waiting in a full fleet and giving up earns one
window per request, not the hours waited. The credit (kind `sla_credit`: spent before cash,
after grants) is keyed by the instance and the request's instant, so one request is
credited once whatever retries; an event on the instance says what was credited. When the window
passes with the request still open, an event warns the owner (`warn_overdue`, once per request).
A node replaced by the platform does not restart the clock; a request given up within the window
gets nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.money import Money, rate_micros
from cardhour.core.states import InstanceStatus
from cardhour.db.locking import for_update
from cardhour.db.models import InstanceRow
from cardhour.services.billing import credit_accounts, ledger, metering
from cardhour.store.compute.instances import note

OPEN = (InstanceStatus.PENDING.value, InstanceStatus.PROVISIONING.value)


def settle_ready(session: Session, row: InstanceRow, now: datetime) -> Money | None:
    """The instance is ready at `now`: credit the wait if the SLA was missed, close the
    request. Returns the credit, or None."""
    return _settle(session, row, now, "ready")


def settle_given_up(
    session: Session, row: InstanceRow, now: datetime, by_platform: bool
) -> Money | None:
    """The request was given up at `now` before the instance was ready (called by the state
    function): credit the wait if the window had passed, close the request. Given up by its
    owner (a stop, a terminate), the credit is the window's worth at most; failed by the
    platform, the whole wait."""
    if by_platform:
        return _settle(session, row, now, "failed")
    return _settle(session, row, now, "given up", cap=True)


def warn_overdue(session: Session, now: datetime) -> int:
    """An event on each instance whose open request passed its window by `now` and was not
    warned yet. Returns how many were warned."""
    stmt = for_update(
        select(InstanceRow)
        .where(
            InstanceRow.status.in_(OPEN),
            InstanceRow.requested_at.is_not(None),
            InstanceRow.sla_warned_at.is_(None),
        )
        .order_by(InstanceRow.id),  # one lock order with the other writers of these rows
        skip_locked=True,  # a row being placed or stopped right now is warned on a later pass
    )
    warned = 0
    for row in session.scalars(stmt):
        assert row.requested_at is not None
        if now - as_utc(row.requested_at) < timedelta(seconds=row.sla_seconds):
            continue
        row.sla_warned_at = now
        note(
            session,
            row,
            now,
            f"SLA: not ready {row.sla_seconds // 60} min after the request; the whole wait is "
            "credited when it is ready (or if you give it up)",
        )
        warned += 1
    session.flush()
    return warned


def _settle(
    session: Session, row: InstanceRow, now: datetime, how: str, cap: bool = False
) -> Money | None:
    if row.requested_at is None:
        return None
    requested = as_utc(row.requested_at)
    row.requested_at, row.sla_warned_at = None, None
    waited = (now - requested) // timedelta(seconds=1)
    if waited <= row.sla_seconds:
        return None
    credited = min(waited, row.sla_seconds) if cap else waited
    amount = Money(
        rate_micros(row.price_micros, credited * metering.cards(row) * 1000), row.currency
    )
    if amount.micros <= 0:
        return None
    credit_id = f"sla-{row.id}-{int(requested.timestamp())}"
    grant = credit_accounts.CreditGrant(ledger.SLA, amount, credit_id, ref=row.id)
    credit_accounts.grant_credit(session, row.owner_id, grant, now)
    minutes, seconds = divmod(waited, 60)
    note(
        session,
        row,
        now,
        f"SLA: {how} {minutes} min {seconds} s after the request (more than "
        f"{row.sla_seconds // 60} min): {amount.display()} {amount.currency} credited"
        + (f" (the window's worth, {row.sla_seconds // 60} min)" if credited < waited else ""),
    )
    return amount
