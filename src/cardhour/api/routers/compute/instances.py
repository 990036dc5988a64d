"""Instances. Routes record intent and wake the reconcilers; they never call a backend."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from fastapi import APIRouter, Depends, Response
from sqlalchemy.orm import Session

from cardhour.api import schemas
from cardhour.api.convert import compute as convert
from cardhour.api.deps import Ctx, get_ctx
from cardhour.api.idempotency import IDEMPOTENCY_RESPONSES, Idempotency, idempotency
from cardhour.db.models import InstanceRow, UserRow
from cardhour.services.compute import instances, views
from cardhour.services.compute import slurm as slurm_service
from cardhour.services.compute.instances import LaunchRequest
from cardhour.services.storage import starts

router = APIRouter(prefix="/instances", tags=["instances"])


@router.post(
    "", response_model=schemas.InstanceRead, status_code=201, responses=IDEMPOTENCY_RESPONSES
)
def create(
    body: schemas.InstanceCreate,
    ctx: Ctx = Depends(get_ctx),
    idem: Idempotency = Depends(idempotency),
) -> Response:
    """Launch: refused with 402 `insufficient_balance` when the balance does not cover an hour.

    With `Idempotency-Key`, a retry returns the first launch instead of launching again."""
    p = ctx.platform
    req = LaunchRequest(**body.model_dump())  # by field name: both carry the same names

    def launch(session: Session, user: UserRow) -> schemas.InstanceRead:
        # the detail view from what the launch wrote, not read back
        return convert.instance_read(
            views.launched(instances.launch(session, p.catalog, user, req, ctx.now))
        )

    response = idem.run_user(ctx, launch, status_code=201)
    p.wake()
    return response


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


@router.get("/{ident}/slurm", response_model=schemas.SlurmFilesRead)
def slurm(ident: str, ctx: Ctx = Depends(get_ctx)) -> schemas.SlurmFilesRead:
    """One-click Slurm: the config files that make the running instance's nodes a Slurm
    cluster (head = controller, IB leaves as the topology tree). 409 unless it runs."""
    with ctx.user_tx() as (session, user):
        row = instances.get(session, user, ident)
        return schemas.SlurmFilesRead(files=slurm_service.slurm_files(session, row).as_dict())


def _act(ctx: Ctx, ident: str, action: Callable[..., InstanceRow]) -> schemas.InstanceRead:
    """Record the user's intent, commit, then wake the reconcilers that carry it out."""
    with ctx.user_tx() as (session, user):
        result = convert.instance(session, action(session, user, ident, ctx.now))
    ctx.platform.wake()
    return result


def _act_once(
    ctx: Ctx, idem: Idempotency, ident: str, action: Callable[..., InstanceRow]
) -> Response:
    """`_act` through the `Idempotency-Key` helper: a retry with the key replays the first."""

    def act(session: Session, user: UserRow) -> schemas.InstanceRead:
        return convert.instance(session, action(session, user, ident, ctx.now))

    response = idem.run_user(ctx, act)
    ctx.platform.wake()
    return response


@router.post("/{ident}/stop", response_model=schemas.InstanceRead, responses=IDEMPOTENCY_RESPONSES)
def stop(
    ident: str, ctx: Ctx = Depends(get_ctx), idem: Idempotency = Depends(idempotency)
) -> Response:
    """Billing stops at once; the GPUs are released (a later start may land elsewhere)."""
    return _act_once(ctx, idem, ident, instances.stop)


@router.post(
    "/{ident}/start",
    response_model=schemas.InstanceRead,
    responses={**IDEMPOTENCY_RESPONSES, 409: {"model": schemas.ErrorRead}},
)
def start(
    ident: str,
    body: schemas.InstanceStart | None = None,
    ctx: Ctx = Depends(get_ctx),
    idem: Idempotency = Depends(idempotency),
) -> Response:
    """A stopped instance goes back to the scheduler; the balance must cover an hour. One
    whose stop kept its disk starts on the disk's host; when that host's GPUs are taken, 409
    `start_choice_needed` gives the choices (`details`, as `GET .../start-choices`) and the
    `mode` of the body picks one."""
    mode = body.mode if body is not None else starts.AUTO
    catalog = ctx.platform.catalog

    def act(session: Session, user: UserRow, ident: str, now: datetime) -> InstanceRow:
        return starts.start(session, catalog, user, ident, now, mode)

    return _act_once(ctx, idem, ident, act)


@router.get("/{ident}/start-choices", response_model=schemas.StartChoicesRead)
def start_choices(ident: str, ctx: Ctx = Depends(get_ctx)) -> schemas.StartChoicesRead:
    """What a start can do now: where the disk is kept, whether its host's GPUs are free, the
    price per hour without GPUs, the host a move would go to and the copy's estimate."""
    with ctx.user_tx() as (session, user):
        row = instances.get(session, user, ident)
        found = starts.choices(session, ctx.platform.catalog, row)
        return schemas.StartChoicesRead.model_validate(found.as_details())


@router.delete("/{ident}", response_model=schemas.InstanceRead)
def terminate(ident: str, ctx: Ctx = Depends(get_ctx)) -> schemas.InstanceRead:
    """Idempotent."""
    return _act(ctx, ident, instances.terminate)
