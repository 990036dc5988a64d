"""Grants of card-hours: a team's usage report, and the operator's dashboard (admin role)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from cardhour.api import schemas
from cardhour.api.deps import Ctx, get_ctx
from cardhour.api.schemas.grant_hours import GrantDashboardRead, GrantReportRead
from cardhour.core.errors import NotFound
from cardhour.services.accounts import users as accounts
from cardhour.services.grants import hours as grant_hours

router = APIRouter(tags=["grants"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": schemas.ErrorRead, "description": "no or a bad API key"},
    403: {"model": schemas.ErrorRead, "description": "not the admin role"},
    404: {"model": schemas.ErrorRead, "description": "no such grant in your teams"},
}


@router.get("/grants", response_model=list[GrantReportRead], responses=_ERRORS)
def my_grants(ctx: Ctx = Depends(get_ctx)) -> list[GrantReportRead]:
    """The grants of every team you are a member of, with their usage."""
    with ctx.user_tx() as (session, user):
        rows = grant_hours.grants_of(session, user.id)
        reports = [grant_hours.report(session, row.id, ctx.now) for row in rows]
    return [GrantReportRead.model_validate(r.to_dict()) for r in reports]


@router.get("/grants/{grant_id}", response_model=GrantReportRead, responses=_ERRORS)
def grant_report(grant_id: str, ctx: Ctx = Depends(get_ctx)) -> GrantReportRead:
    """One grant's usage: hours used by instance and by member, expired, remaining, burn rate.
    For members of its team and admins; anyone else gets 404, as for a grant that does not
    exist."""
    with ctx.user_tx() as (session, user):
        mine = {row.id for row in grant_hours.grants_of(session, user.id)}
        if grant_id not in mine and user.role != "admin":
            raise NotFound(f"no grant {grant_id}")
        report = grant_hours.report(session, grant_id, ctx.now)
    return GrantReportRead.model_validate(report.to_dict())


@router.get("/admin/grants", response_model=GrantDashboardRead, responses=_ERRORS)
def dashboard(ctx: Ctx = Depends(get_ctx)) -> GrantDashboardRead:
    """Every grant: hours granted, used, expired and remaining, with each grant's report."""
    with ctx.user_tx() as (session, user):
        accounts.require_admin(user)
        board = grant_hours.dashboard(session, ctx.now)
    return GrantDashboardRead.model_validate(board.to_dict())
