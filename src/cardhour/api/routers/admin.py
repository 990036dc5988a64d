"""Operator endpoints: every route here needs the admin role."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query

from cardhour.api import convert, schemas
from cardhour.api.deps import Ctx, get_ctx
from cardhour.services import accounts, defrag, fleet

router = APIRouter(prefix="/admin", tags=["admin"])


@router.get("/nodes", response_model=list[schemas.NodeRead])
def nodes(ctx: Ctx = Depends(get_ctx)) -> list[schemas.NodeRead]:
    """The fleet with live GPU allocations."""
    with ctx.user_tx() as (session, user):
        accounts.require_admin(user)
        return [
            schemas.NodeRead(
                id=row.id,
                data_centre=row.data_centre,
                gpu=row.gpu_model,
                gpu_count=row.gpu_count,
                used_gpus=used,
                free_gpus=row.gpu_count - len(used),
                ib_leaf=row.ib_leaf,
                ib_spine=row.ib_spine,
                schedulable=row.schedulable,
            )
            for row, used in fleet.node_usage(session)
        ]


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
