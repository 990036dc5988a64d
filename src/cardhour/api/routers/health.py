"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from sqlalchemy import text

from cardhour import __version__
from cardhour.api import schemas
from cardhour.api.deps import Ctx, get_ctx

router = APIRouter(tags=["health"])


@router.get("/health", response_model=schemas.HealthRead)
def health(ctx: Ctx = Depends(get_ctx)) -> schemas.HealthRead:
    with ctx.tx() as session:
        session.execute(text("SELECT 1"))
        dialect = session.get_bind().dialect.name
    return schemas.HealthRead(
        status="ok", version=__version__, database=dialect, backend=ctx.platform.backend.name
    )
