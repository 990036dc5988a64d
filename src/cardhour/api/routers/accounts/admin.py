"""Operator endpoints of accounts: what the sign-in throttle locked. Admin role only."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query

from cardhour.api import schemas
from cardhour.api.deps import Ctx, get_ctx
from cardhour.services.accounts import throttle
from cardhour.services.accounts import users as accounts

router = APIRouter(prefix="/admin", tags=["admin"])


@router.get("/auth-events", response_model=list[schemas.AuthEventRead])
def auth_events(
    limit: int = Query(default=100, ge=1, le=1000), ctx: Ctx = Depends(get_ctx)
) -> list[schemas.AuthEventRead]:
    """The latest locks of accounts and client addresses after too many failed sign-ins or
    sign-ups, newest first."""
    with ctx.user_tx() as (session, user):
        accounts.require_admin(user)
        return [
            schemas.AuthEventRead(at=e.at, kind=e.kind, key=e.key, detail=e.detail)
            for e in throttle.events(session, limit)
        ]
