"""Persistent volumes: create, list, delete, attach to an instance at its launch, detach when
it is terminated (docs/dev/storage.md). Everything here runs in the caller's transaction and
calls no backend: the hosts learn what to mount from the instance's container spec, and a
deleted volume's data is removed by the storage reconciler through its host.

A volume lives in one data centre; an instance mounting it is placed there (and, for a volume
on a host's own folder, on that host: `InstanceRow.placement_dc`, `placement_host`). It stays
attached to the instance through stops and starts and is detached when the instance is
terminated, so it is attached to one instance at a time. Another tenant's volume is
indistinguishable from a missing one.

Lock order: an instance's row, then its volumes' rows (in id order), then ledger accounts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from cardhour.core.catalog import Catalog
from cardhour.core.errors import Conflict, InsufficientBalance, InvalidInput, NotFound
from cardhour.core.money import Money
from cardhour.core.storage import volumes as core
from cardhour.core.storage.volumes import ATTACHED, AVAILABLE, DELETED, DELETING, MountRequest
from cardhour.db.models import InstanceRow, UserRow, VolumeEventRow, VolumeRow
from cardhour.services.ids import new_id
from cardhour.services.storage import charges
from cardhour.store.storage import volumes as store

MAX_VOLUMES = 100  # live volumes per account


def create(
    session: Session,
    catalog: Catalog,
    user: UserRow,
    name: str,
    size: str | int,
    data_centre: str,
    now: datetime,
) -> VolumeRow:
    """A new, empty volume (`available`); its data is made on the first host that mounts it.
    InvalidInput for a bad name, size or data centre; Conflict for a name the owner has;
    InsufficientBalance when the owner's available balance does not cover an hour of it and of
    the volumes the owner keeps."""
    core.check_name(name)
    size_gb = core.parse_size(size, catalog.storage.max_volume_gb)
    dcs = [dc.id for dc in catalog.data_centres]
    if data_centre not in dcs:
        raise InvalidInput(
            f"unknown data centre {data_centre!r}; data centres: {', '.join(dcs)}",
            field="data_centre",
        )
    if store.name_taken(session, user.id, name):
        raise Conflict(f"you already have a volume named {name!r}", field="name")
    live = store.list_owned(session, user.id)
    if len(live) >= MAX_VOLUMES:
        raise Conflict(f"an account holds at most {MAX_VOLUMES} volumes: delete one first")
    price = catalog.storage.price(data_centre)
    hour = Money(core.storage_cost(size_gb, 3600, price.micros), price.currency)
    kept = Money(
        sum(core.storage_cost(r.size_gb, 3600, r.price_micros) for r in live), price.currency
    )
    available = charges.spendable(session, user.id, price.currency, now)
    if available < hour + kept:
        also = f" and of the volumes you have ({kept.exact_str()})" if kept.micros else ""
        raise InsufficientBalance(
            f"available balance {available.floor_str()} {price.currency} does not cover one "
            f"hour of a {size_gb} GiB volume ({hour.exact_str()} {price.currency}){also}",
            needed=(hour + kept).exact_str(),
            available=available.floor_str(),
        )
    row = store.add(
        session,
        VolumeRow(
            id=new_id(),
            owner_id=user.id,
            name=name,
            data_centre=data_centre,
            size_gb=size_gb,
            state=AVAILABLE,
            store=catalog.storage.shared_path(data_centre),
            price_micros=price.micros,
            currency=price.currency,
            billed_micros=0,
            billed_until=now,
            created_at=now,
        ),
    )
    event(session, row, "created", f"{size_gb} GiB in {data_centre} at {price.exact_str()} "
          f"{price.currency} per GB-hour", now)  # fmt: skip
    return row


def event(session: Session, row: VolumeRow, kind: str, message: str, now: datetime) -> None:
    """Record what happened to the volume (its owner sees the events)."""
    store.add_event(session, VolumeEventRow(volume_id=row.id, at=now, kind=kind, message=message))


def events_of(session: Session, row: VolumeRow) -> list[VolumeEventRow]:
    return store.events_of(session, row.id)


def list_for(session: Session, user: UserRow, include_deleted: bool = False) -> list[VolumeRow]:
    return store.list_owned(session, user.id, include_deleted)


def get(session: Session, user: UserRow, ident: str, lock: bool = False) -> VolumeRow:
    row = store.find_owned(session, user.id, ident, lock=lock)
    if row is None:
        raise NotFound(f"no volume {ident!r}")
    return row


def delete(session: Session, user: UserRow, ident: str, now: datetime) -> VolumeRow:
    """Ask for the volume to go: refused (Conflict) while attached. Billing ends now. A volume
    no instance was ever placed with is deleted at once; another is `deleting` until its host
    removed the data (the storage reconciler). Deleting a volume being deleted returns it."""
    row = get(session, user, ident, lock=True)
    if row.state == ATTACHED:
        raise Conflict(
            f"volume {row.name} is attached to an instance ({row.instance_id}): terminate "
            "the instance first",
            instance_id=row.instance_id,
        )
    if row.state == DELETING:
        return row
    request_delete(session, row, now, "deleted by its owner")
    return row


def request_delete(session: Session, row: VolumeRow, now: datetime, why: str) -> None:
    """Billing ends now; a volume no host ever made is deleted at once, one that a host may
    have made is `deleting` until that host removed its image."""
    row.delete_requested_at = now
    event(session, row, "delete_requested", why, now)
    if row.host is None:
        mark_deleted(session, row, now, f"{why}; no host ever made it")
    else:
        row.state = DELETING
        row.reason = f"{why}; its host removes the data"
    session.flush()


@dataclass(frozen=True)
class Going:
    """A volume being deleted, as the storage reconciler removes its data."""

    id: str
    host: str | None
    store: str | None


def being_deleted(session: Session) -> list[Going]:
    return [Going(r.id, r.host, r.store) for r in store.being_deleted(session)]


def deleted(session: Session, volume_id: str, now: datetime) -> bool:
    """Its host removed its data: the volume is `deleted` (False: it was not being deleted)."""
    row = store.get(session, volume_id, lock=True)
    if row is None or row.state != DELETING:
        return False
    mark_deleted(session, row, now, "deleted; its host removed the data")
    session.flush()
    return True


def mark_deleted(session: Session, row: VolumeRow, now: datetime, reason: str) -> None:
    row.state = DELETED
    row.deleted_at = now
    row.reason = reason
    row.instance_id = row.mount_path = None
    event(session, row, "deleted", reason, now)


def where(
    session: Session,
    catalog: Catalog,
    user: UserRow,
    mounts: list[MountRequest],
    data_centre: str | None,
) -> str | None:
    """The data centre a launch mounting `mounts` runs in: `data_centre` when given (checked),
    else its volumes', else None (anywhere). NotFound for a volume the owner lacks;
    InvalidInput for an unknown data centre or volumes elsewhere."""
    if data_centre is not None and data_centre not in {dc.id for dc in catalog.data_centres}:
        known = ", ".join(dc.id for dc in catalog.data_centres)
        raise InvalidInput(
            f"unknown data centre {data_centre!r}; data centres: {known}", field="data_centre"
        )
    rows = {m.volume: get(session, user, m.volume) for m in mounts}
    if len({row.id for row in rows.values()}) < len(rows):
        raise InvalidInput("volumes: one volume is listed twice (by name and id)", field="volumes")
    places = {name: row.data_centre for name, row in rows.items()}
    if len(set(places.values())) > 1:
        said = ", ".join(f"{name} in {dc}" for name, dc in sorted(places.items()))
        raise InvalidInput(
            f"volumes: these volumes are in different data centres ({said}); an instance "
            "runs in one",
            field="volumes",
        )
    found = next(iter(places.values()), None)
    if found is not None and data_centre is not None and found != data_centre:
        name = next(iter(places))
        raise InvalidInput(
            f"volumes: volume {name} is in {found}, not in {data_centre} where the instance "
            "is to run",
            field="volumes",
        )
    return data_centre or found


def attach(
    session: Session,
    user: UserRow,
    instance: InstanceRow,
    mounts: list[MountRequest],
    now: datetime,
) -> list[VolumeRow]:
    """Attach the owner's volumes to `instance` (being launched in their data centre:
    `where`) and pin it, for a volume on a host's own folder, to that host. NotFound for a
    volume the owner lacks; Conflict for one attached elsewhere or being deleted; InvalidInput
    for volumes on several hosts."""
    found = {m.volume: get(session, user, m.volume) for m in mounts}
    locked = {  # in id order, the lock order of volumes
        row.id: get(session, user, row.id, lock=True)
        for row in sorted(found.values(), key=lambda r: r.id)
    }
    rows = [locked[found[m.volume].id] for m in mounts]
    for row in rows:
        if row.state == ATTACHED:
            raise Conflict(
                f"volume {row.name} is attached to another instance ({row.instance_id})",
                field="volumes",
            )
        if row.state != AVAILABLE:
            raise Conflict(f"volume {row.name} is {row.state}", field="volumes")
    hosts = sorted({r.host for r in rows if r.store is None and r.host is not None})
    if len(hosts) > 1:
        raise InvalidInput(
            f"volumes: these volumes are on different hosts ({', '.join(hosts)}); an instance "
            "runs on one",
            field="volumes",
        )
    for row, mount in zip(rows, mounts, strict=True):
        row.state = ATTACHED
        row.instance_id = instance.id
        row.mount_path = mount.path
        event(session, row, "attached", f"to instance {instance.name} at {mount.path}", now)
    if hosts:
        instance.placement_host = hosts[0]
    session.flush()
    return rows


def placed(session: Session, instance: InstanceRow, nodes: list[str]) -> None:
    """The instance was placed on `nodes`: its volumes on no host yet live on its first node
    from now on (a shared store's too: that host removes the data on delete), and the instance
    is pinned there for its next starts when one lives on that host's own disk."""
    for row in store.attached_to(session, instance.id, lock=True):
        if row.host is None or row.store is not None:
            row.host = nodes[0]
        if row.store is None:
            instance.placement_host = row.host


def detach(session: Session, instance: InstanceRow, now: datetime) -> None:
    """The instance is terminated: its volumes are free for another instance."""
    for row in store.attached_to(session, instance.id, lock=True):
        row.state = AVAILABLE
        row.instance_id = row.mount_path = None
        event(session, row, "detached", f"instance {instance.name} was terminated", now)


def formatted(session: Session, instance: InstanceRow, now: datetime) -> None:
    """The instance ran: its volumes hold data from now on (a missing image is an error)."""
    for row in store.attached_to(session, instance.id, lock=True):
        if row.formatted_at is None:
            row.formatted_at = now


def lock_of_instance(session: Session, instance: InstanceRow) -> None:
    """Lock the rows of the instance's volumes and kept disk, in id order, in one query."""
    store.of_instance(session, instance.id, lock=True)


def pins_to_host(session: Session, instance: InstanceRow) -> bool:
    """Whether one of the instance's volumes lives on a host's own disk (it runs there)."""
    return any(row.store is None for row in store.attached_to(session, instance.id))


def attached_to(session: Session, instance: InstanceRow) -> list[VolumeRow]:
    """The volumes attached to the instance, by mount path."""
    return sorted(store.attached_to(session, instance.id), key=lambda r: r.mount_path or "")


def attachments(session: Session, instance: InstanceRow) -> list[core.Attachment]:
    """What the instance's containers mount, as the hosts backend passes it on."""
    return [
        core.Attachment(
            row.id, row.size_gb, row.mount_path or "/data", row.store, row.formatted_at is not None
        )
        for row in store.attached_to(session, instance.id)
    ]
