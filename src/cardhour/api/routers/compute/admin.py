"""Operator endpoints: every route here needs the admin role."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Response
from sqlalchemy.orm import Session

from cardhour.api import schemas
from cardhour.api.convert import compute as convert
from cardhour.api.deps import Ctx, get_ctx
from cardhour.api.idempotency import IDEMPOTENCY_RESPONSES, Idempotency, idempotency
from cardhour.db.models import UserRow
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import topups
from cardhour.services.compute import defrag, fleet

router = APIRouter(prefix="/admin", tags=["admin"])


def _node(usage: fleet.NodeUsage) -> schemas.NodeRead:
    row = usage.row
    return schemas.NodeRead(
        id=row.id,
        data_centre=row.data_centre,
        gpu=row.gpu_model,
        gpu_count=row.gpu_count,
        used_gpus=usage.used_gpus,
        app_replicas=[schemas.ReplicaShareRead(**vars(r)) for r in usage.replicas],
        free_gpus=usage.free_gpus,
        ib_leaf=row.ib_leaf,
        ib_spine=row.ib_spine,
        schedulable=row.schedulable,
        drained_reason=row.drained_reason,
    )


@router.get("/nodes", response_model=list[schemas.NodeRead])
def nodes(ctx: Ctx = Depends(get_ctx)) -> list[schemas.NodeRead]:
    """The fleet with live GPU allocations."""
    with ctx.user_tx() as (session, user):
        accounts.require_admin(user)
        return [_node(usage) for usage in fleet.node_usage(session)]


@router.post("/nodes/{node_id}/resume", response_model=schemas.NodeRead)
def resume_node(node_id: str, ctx: Ctx = Depends(get_ctx)) -> schemas.NodeRead:
    """Put a node the readiness gate drained back into scheduling (after repairing it)."""
    with ctx.user_tx() as (session, user):
        accounts.require_admin(user)
        fleet.resume(session, node_id)
        return _node(next(u for u in fleet.node_usage(session) if u.row.id == node_id))


@router.get("/defrag", response_model=schemas.DefragRead)
def defrag_plan(
    # optional so the role is checked first; an empty value is refused as bad input after it
    gpu: str = Query("", description="MODEL:COUNT to make room for.", examples=["H100:8"]),
    ctx: Ctx = Depends(get_ctx),
) -> schemas.DefragRead:
    """Which movable instances to move, and where, so `gpu` fits. A proposal: nothing moves."""
    p = ctx.platform
    with ctx.user_tx() as (session, user):
        accounts.require_admin(user)
        window = p.settings.scheduler.workload_window
        answer = defrag.ask(session, p.catalog, p.policy.profile, window, gpu)
    return convert.defrag_answer(answer)


@router.post(
    "/topups", response_model=schemas.TopUpRead, status_code=201, responses=IDEMPOTENCY_RESPONSES
)
def top_up(
    body: schemas.TopUpCreate,
    ctx: Ctx = Depends(get_ctx),
    idem: Idempotency = Depends(idempotency),
) -> Response:
    """Credit cash to an account (money received outside cardhour, e.g. a bank transfer).

    The same `reference` is credited once (409 `conflict` for another account or amount); send
    `Idempotency-Key` too when no reference is given, so a retry does not credit twice."""
    currency = ctx.platform.catalog.currency

    def credit(session: Session, user: UserRow) -> schemas.TopUpRead:
        accounts.require_admin(user)
        amount = topups.parse_amount(body.amount, currency)
        reference = topups.reference_or_new(body.reference)
        done = topups.top_up_by_email(session, body.email, amount, ctx.now, reference)
        return schemas.TopUpRead(
            user_id=done.user_id,
            email=done.email,
            amount=done.amount.display(),
            currency=done.amount.currency,
            reference=done.reference,
            transfer_id=done.transfer_id,
        )

    return idem.run_user(ctx, credit, status_code=201)


@router.post("/users/role", response_model=schemas.UserRead)
def set_role(body: schemas.RoleSet, ctx: Ctx = Depends(get_ctx)) -> schemas.UserRead:
    """Give an account a role: `user`, `reviewer` (scores the proposals assigned to them) or
    `admin`. An admin cannot change their own role."""
    with ctx.user_tx() as (session, user):
        return convert.user(accounts.set_role(session, user, body.email, body.role))
