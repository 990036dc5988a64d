"""Instances. Routes record intent and wake the reconcilers; they never call a backend."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Depends

from cardhour.api import convert, schemas
from cardhour.api.deps import Ctx, get_ctx
from cardhour.db.models import InstanceRow
from cardhour.services import instances
from cardhour.services.instances import LaunchRequest

router = APIRouter(prefix="/instances", tags=["instances"])


@router.post("", response_model=schemas.InstanceRead, status_code=201)
def create(body: schemas.InstanceCreate, ctx: Ctx = Depends(get_ctx)) -> schemas.InstanceRead:
    """Launch: refused with 402 `insufficient_balance` when the balance does not cover an hour."""
    p = ctx.platform
    req = LaunchRequest(
        body.gpu, body.count, body.name, body.image, body.ssh_key, body.plan, body.movable
    )
    with ctx.user_tx() as (session, user):
        row = instances.create(session, p.catalog, p.policy, user, req, ctx.now)
        result = convert.instance(session, row, events=True)
    p.wake()
    return result


@router.get("", response_model=list[schemas.InstanceRead])
def list_instances(all: bool = False, ctx: Ctx = Depends(get_ctx)) -> list[schemas.InstanceRead]:
    with ctx.user_tx() as (session, user):
        rows = instances.list_for(session, user, include_terminated=all)
        return [convert.instance(session, r) for r in rows]


@router.get("/{ident}", response_model=schemas.InstanceRead)
def show(ident: str, ctx: Ctx = Depends(get_ctx)) -> schemas.InstanceRead:
    """By id or name. Another account's instance is a 404, like a missing one."""
    with ctx.user_tx() as (session, user):
        return convert.instance(session, instances.get(session, user, ident), events=True)


def _act(ctx: Ctx, ident: str, action: Callable[..., InstanceRow]) -> schemas.InstanceRead:
    """Record the user's intent, commit, then wake the reconcilers that carry it out."""
    with ctx.user_tx() as (session, user):
        result = convert.instance(session, action(session, user, ident, ctx.now))
    ctx.platform.wake()
    return result


@router.post("/{ident}/stop", response_model=schemas.InstanceRead)
def stop(ident: str, ctx: Ctx = Depends(get_ctx)) -> schemas.InstanceRead:
    """Billing stops at once; the GPUs are released (a later start may land elsewhere)."""
    return _act(ctx, ident, instances.stop)


@router.post("/{ident}/start", response_model=schemas.InstanceRead)
def start(ident: str, ctx: Ctx = Depends(get_ctx)) -> schemas.InstanceRead:
    """A stopped instance goes back to the scheduler; the balance must cover an hour."""
    return _act(ctx, ident, instances.start)


@router.delete("/{ident}", response_model=schemas.InstanceRead)
def terminate(ident: str, ctx: Ctx = Depends(get_ctx)) -> schemas.InstanceRead:
    """Idempotent."""
    return _act(ctx, ident, instances.terminate)
