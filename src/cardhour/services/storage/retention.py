"""Volumes of owners whose money ran out: never deleted silently (docs/dev/storage.md).

When what an owner has for storage (cash, credits not tied to GPU models, and what is held for
their instances) is zero or less, each of their
volumes becomes overdue: it is kept, and still charged, for the retention period, with a notice
at once and another a day before the end; once the balance is positive again the volumes are
kept for good (a notice says so). At the end of the period a volume is deleted, unless an
instance that is not stopped still has it attached (it waits for that instance to stop, as the
auto-stop of an owner without money does); one attached to a stopped instance is detached
first. A stopped instance's kept disk (a volume row of kind `disk`) goes the same way: at the
end of the period the instance is terminated, and its disk with it. Every step is an event on
the volume and a notification to its owner.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.states import InstanceStatus
from cardhour.core.storage.volumes import ATTACHED, AVAILABLE, DISK
from cardhour.db.models import VolumeRow
from cardhour.services.accounts import notifications
from cardhour.services.billing import wallet
from cardhour.services.compute.lifecycle import switch_status
from cardhour.services.storage import charges
from cardhour.services.storage.volumes import event, request_delete
from cardhour.store.compute import instances as instance_store
from cardhour.store.storage import volumes as store

WARN_BEFORE = timedelta(days=1)


def check(session: Session, now: datetime, currency: str, retention: timedelta) -> int:
    """One pass over every owner of live volumes; returns how many volumes it changed. Locks
    the instances holding volumes whose time is up, then the owner's volumes (the lock order:
    an instance, then its volumes)."""
    changed = 0
    for owner_id in store.live_owners(session):
        held = wallet.balance(session, owner_id, currency, now).held  # still theirs
        broke = (charges.spendable(session, owner_id, currency, now) + held).micros <= 0
        due = sorted(  # the instances holding volumes whose time is up: locked first
            r.instance_id
            for r in store.live_of(session, owner_id)
            if r.instance_id is not None
            and r.overdue_since is not None
            and now >= as_utc(r.overdue_since) + retention
        )
        for instance_id in due:
            instance_store.get_instance(session, instance_id, lock=True)
        rows = store.live_of(session, owner_id, lock=True)  # then the volumes, fresh
        if broke:
            changed += _overdue(session, owner_id, rows, now, retention, set(due))
        elif any(r.overdue_since is not None for r in rows):
            names = ", ".join(r.name for r in rows if r.overdue_since is not None)
            for row in rows:
                if row.overdue_since is not None:
                    row.overdue_since = row.overdue_warned_at = None
                    event(session, row, "kept", "the balance is positive again", now)
                    changed += 1
            notifications.notify(
                session, [owner_id], f"Your volumes are kept: {names}",
                "Your balance is positive again, so your volumes are no longer scheduled for "
                "deletion.", now,
            )  # fmt: skip
    session.flush()
    return changed


def _overdue(
    session: Session,
    owner_id: str,
    rows: list[VolumeRow],
    now: datetime,
    retention: timedelta,
    locked: set[str],
) -> int:
    changed = 0
    fresh = [r for r in rows if r.overdue_since is None]
    if fresh:
        until = now + retention
        for row in fresh:
            row.overdue_since = now
            event(session, row, "overdue", f"your balance ran out: kept until "
                  f"{until:%Y-%m-%d %H:%M} UTC, then deleted unless you top up", now)  # fmt: skip
            changed += 1
        notifications.notify(
            session, [owner_id],
            f"Top up to keep your volumes: deleted on {until:%Y-%m-%d %H:%M} UTC otherwise",
            f"Your balance ran out. Your volumes ({', '.join(r.name for r in fresh)}) are kept "
            f"and charged until {until:%Y-%m-%d %H:%M} UTC, then deleted with their data "
            "unless your balance is positive again.", now,
        )  # fmt: skip
    for row in rows:
        if row.overdue_since is None:
            continue
        end = as_utc(row.overdue_since) + retention
        if now >= end:
            changed += _expire(session, owner_id, row, now, retention, locked)
        elif now >= end - WARN_BEFORE and row.overdue_warned_at is None:
            row.overdue_warned_at = now
            event(session, row, "warned", f"deleted at {end:%Y-%m-%d %H:%M} UTC", now)
            notifications.notify(
                session, [owner_id], f"Volume {row.name} is deleted in a day",
                f"Your balance is still not positive: volume {row.name} and its data are "
                f"deleted at {end:%Y-%m-%d %H:%M} UTC unless you top up.", now,
            )  # fmt: skip
            changed += 1
    return changed


#: an instance in these still has its volumes in use: a volume it holds waits for it to stop
IN_USE = (InstanceStatus.PENDING, InstanceStatus.PROVISIONING, InstanceStatus.RUNNING,
          InstanceStatus.STOPPING)  # fmt: skip


def _expire(
    session: Session,
    owner_id: str,
    row: VolumeRow,
    now: datetime,
    retention: timedelta,
    locked: set[str],
) -> int:
    """The retention period is over: delete the volume (detached first from a stopped
    instance, whose row `locked` says this transaction holds); 0 while an instance that still
    runs holds it, or one this pass did not lock (attached since: the next pass)."""
    if row.kind == DISK:
        return _expire_disk(session, owner_id, row, now, retention, locked)
    if row.state == ATTACHED and row.instance_id is not None:
        if row.instance_id not in locked:
            return 0
        instance = instance_store.get_instance(session, row.instance_id)
        if instance is not None and InstanceStatus(instance.status) in IN_USE:
            return 0
        name = instance.name if instance is not None else row.instance_id
        row.state, row.instance_id, row.mount_path = AVAILABLE, None, None
        event(session, row, "detached", f"from instance {name}, to be deleted", now)
    why = f"deleted after {retention.days} days without money"
    request_delete(session, row, now, why)
    notifications.notify(
        session, [owner_id], f"Volume {row.name} was deleted",
        f"Volume {row.name} and its data were {why} (your balance stayed at or below zero).",
        now,
    )  # fmt: skip
    return 1


def _expire_disk(
    session: Session,
    owner_id: str,
    row: VolumeRow,
    now: datetime,
    retention: timedelta,
    locked: set[str],
) -> int:
    """A stopped instance's kept disk whose retention period is over: the instance is
    terminated, and its disk with it (`lifecycle`, then the storage reconciler lets the host
    remove it); 0 while a start took the instance back, or this pass did not lock it."""
    if row.instance_id not in locked:
        return 0
    instance = instance_store.get_instance(session, row.instance_id or "")
    if instance is None or instance.status != InstanceStatus.STOPPED.value:
        return 0
    why = f"terminated after {retention.days} days without money: its kept disk is deleted"
    instance.desired = "terminated"
    switch_status(session, instance, InstanceStatus.TERMINATED, now, why)
    notifications.notify(
        session, [owner_id], f"Instance {instance.name} was terminated",
        f"Instance {instance.name} was stopped with its disk kept, and your balance stayed at "
        f"or below zero for {retention.days} days: it was {why}.", now,
    )  # fmt: skip
    return 1
