"""A stopped instance's kept container disk, billed as storage (docs/dev/storage.md): from the
stop that kept it until the instance is started or terminated, at the data centre's storage
price, through the same charge and statement lines as volumes (a volume row of kind `disk`,
state `kept`, named `<instance>-disk`, never listed among the owner's volumes).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from cardhour.core.catalog import Catalog
from cardhour.core.storage.volumes import DELETED, DISK, KEPT
from cardhour.db.models import InstanceRow, VolumeRow
from cardhour.services.ids import new_id
from cardhour.services.storage.volumes import event
from cardhour.store.storage import volumes as store


def kept(session: Session, catalog: Catalog, row: InstanceRow, size_gb: int, now: datetime) -> None:
    """The stop of `row` kept its disk of `size_gb` (at least 1) on `row.disk_host`: billed from
    now. Idempotent: a disk already billed for it is left as it is."""
    if store.kept_disks_of(session, row.id):
        return
    dc = row.data_centre or ""
    price = catalog.storage.price(dc)
    disk = VolumeRow(
        id=new_id(),
        owner_id=row.owner_id,
        kind=DISK,
        name=f"{row.name}-disk",
        data_centre=dc,
        size_gb=max(size_gb, 1),
        state=KEPT,
        host=row.disk_host,
        instance_id=row.id,
        formatted_at=now,
        price_micros=price.micros,
        currency=price.currency,
        billed_micros=0,
        billed_until=now,
        created_at=now,
    )
    store.add(session, disk)
    event(session, disk, "kept", f"the disk of instance {row.name} ({disk.size_gb} GiB)", now)


def ended(session: Session, row: InstanceRow, now: datetime, why: str) -> None:
    """The instance was started or terminated: its kept disk is no longer billed."""
    for disk in store.kept_disks_of(session, row.id):
        disk.delete_requested_at = disk.deleted_at = now
        disk.state, disk.reason = DELETED, why
        event(session, disk, "deleted", why, now)
