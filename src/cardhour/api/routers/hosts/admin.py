"""`/admin/hosts`: an operator enrols GPU servers, lists them and removes them (admin role)."""

from __future__ import annotations

import shlex
from datetime import timedelta

from fastapi import APIRouter, Depends, Request

from cardhour.api import schemas
from cardhour.api.deps import Ctx, get_ctx
from cardhour.services.accounts import users as accounts
from cardhour.services.hosts import enrolment, views

router = APIRouter(prefix="/admin/hosts", tags=["hosts"])


def _read(view: views.HostView) -> schemas.HostRead:
    row = view.row
    return schemas.HostRead(
        name=row.name,
        data_centre=row.data_centre,
        state=view.state,
        lost_reason=view.lost_reason,
        gpu=view.gpu,
        gpus=len(view.gpu_names),
        gpu_names=view.gpu_names,
        address=row.address,
        runtime=row.runtime,
        standin=row.standin,
        ib_leaf=row.ib_leaf,
        ib_spine=row.ib_spine,
        containers=view.containers,
        joined_at=row.joined_at,
        last_seen_at=row.last_seen_at,
    )


def _lost_after(ctx: Ctx) -> timedelta:
    return timedelta(seconds=ctx.platform.settings.hosts.lost_after_seconds)


@router.post("", response_model=schemas.HostEnrolled, status_code=201)
def add(
    body: schemas.HostCreate, request: Request, ctx: Ctx = Depends(get_ctx)
) -> schemas.HostEnrolled:
    """Enrol a server: a one-time join token and the command that joins it (run it there)."""
    p = ctx.platform
    with ctx.user_tx() as (session, user):
        accounts.require_admin(user)
        enrolled = enrolment.add(
            session,
            body.name,
            body.data_centre,
            [dc.id for dc in p.catalog.data_centres],
            ctx.now,
            timedelta(seconds=p.settings.hosts.join_token_seconds),
            body.ib_leaf,
            body.ib_spine,
        )
        host = _read(views.view(enrolled.host, ctx.now, _lost_after(ctx), p.catalog.gpu_models, 0))
    url = p.settings.hosts.public_url or str(request.base_url).rstrip("/")
    command = shlex.join(["cardhour", "agent", "--server", url, "--token", enrolled.token])
    return schemas.HostEnrolled(
        host=host, token=enrolled.token, expires_at=enrolled.expires_at, command=command
    )


@router.get("", response_model=list[schemas.HostRead])
def list_hosts(ctx: Ctx = Depends(get_ctx)) -> list[schemas.HostRead]:
    """Every enrolled host: its state, GPUs, last heartbeat and containers."""
    p = ctx.platform
    with ctx.user_tx() as (session, user):
        accounts.require_admin(user)
        found = views.list_views(session, ctx.now, _lost_after(ctx), p.catalog.gpu_models)
        return [_read(v) for v in found]


@router.delete("/{name}", response_model=schemas.HostRead)
def remove(name: str, ctx: Ctx = Depends(get_ctx)) -> schemas.HostRead:
    """Revoke the host's credential and take it out of the fleet; instances on it are placed
    again elsewhere. Idempotent."""
    p = ctx.platform
    with ctx.user_tx() as (session, user):
        accounts.require_admin(user)
        row = enrolment.remove(session, name, ctx.now)
        host = _read(views.view(row, ctx.now, _lost_after(ctx), p.catalog.gpu_models, 0))
    p.wake()
    return host
