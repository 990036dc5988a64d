"""Persistent volumes of the signed-in account (docs/dev/storage.md)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from cardhour.api import schemas
from cardhour.api.deps import Ctx, get_ctx
from cardhour.core.money import Money
from cardhour.core.storage.volumes import storage_cost
from cardhour.db.models import VolumeEventRow, VolumeRow
from cardhour.services.storage import volumes

router = APIRouter(prefix="/volumes", tags=["volumes"])


def read(row: VolumeRow, events: list[VolumeEventRow] | None = None) -> schemas.VolumeRead:
    price = Money(row.price_micros, row.currency)
    return schemas.VolumeRead(
        id=row.id,
        name=row.name,
        data_centre=row.data_centre,
        size_gb=row.size_gb,
        state=row.state,
        instance_id=row.instance_id,
        mount_path=row.mount_path,
        host=row.host,
        shared=row.store is not None,
        currency=row.currency,
        price_per_gb_hour=price.exact_str(),
        hourly=Money(storage_cost(row.size_gb, 3600, row.price_micros), row.currency).exact_str(),
        charged=Money(row.billed_micros, row.currency).exact_str(),
        created_at=row.created_at,
        deleted_at=row.deleted_at,
        reason=row.reason,
        overdue_since=row.overdue_since,
        events=[
            schemas.VolumeEventRead(at=e.at, kind=e.kind, message=e.message) for e in events or []
        ],
    )


@router.post("", response_model=schemas.VolumeRead, status_code=201)
def create(body: schemas.VolumeCreate, ctx: Ctx = Depends(get_ctx)) -> schemas.VolumeRead:
    """Create an empty volume: 422 for a bad name, size or data centre, 409 for a name you
    have, 402 when your balance does not cover an hour of it. Billed per GB-hour from now
    until it is deleted."""
    with ctx.user_tx() as (session, user):
        row = volumes.create(
            session, ctx.platform.catalog, user, body.name, body.size, body.data_centre, ctx.now
        )
        return read(row)


@router.get("", response_model=list[schemas.VolumeRead])
def list_volumes(all: bool = False, ctx: Ctx = Depends(get_ctx)) -> list[schemas.VolumeRead]:
    """Your volumes; with `all`, deleted ones too."""
    with ctx.user_tx() as (session, user):
        return [read(row) for row in volumes.list_for(session, user, include_deleted=all)]


@router.get("/{ident}", response_model=schemas.VolumeRead)
def show(ident: str, ctx: Ctx = Depends(get_ctx)) -> schemas.VolumeRead:
    """By id or name, with its events. Another account's volume is a 404, like a missing
    one."""
    with ctx.user_tx() as (session, user):
        row = volumes.get(session, user, ident)
        return read(row, volumes.events_of(session, row))


@router.delete("/{ident}", response_model=schemas.VolumeRead)
def delete(ident: str, ctx: Ctx = Depends(get_ctx)) -> schemas.VolumeRead:
    """Delete it and its data: 409 while attached to an instance. Billing ends now; the data
    is removed by its host (`deleting` until then)."""
    with ctx.user_tx() as (session, user):
        row = volumes.delete(session, user, ident, ctx.now)
        ctx.platform.wake()
        return read(row)
