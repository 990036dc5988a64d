"""Operator billing endpoints: price changes and credits. Every route needs the admin role."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Depends, Response
from sqlalchemy.orm import Session

from cardhour.api import schemas
from cardhour.api.convert import compute as convert
from cardhour.api.deps import Ctx, get_ctx
from cardhour.api.idempotency import IDEMPOTENCY_RESPONSES, Idempotency, idempotency
from cardhour.db.models import UserRow
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import credits, pricing

router = APIRouter(prefix="/admin", tags=["admin"])


@router.post("/prices", response_model=list[schemas.PriceRead], status_code=201)
def set_price(body: schemas.PriceSet, ctx: Ctx = Depends(get_ctx)) -> list[schemas.PriceRead]:
    """A new on-demand price from `effective_from` (now or later): it applies to usage after it,
    running instances included; quotes already given are honoured."""
    p = ctx.platform
    with ctx.user_tx() as (session, user):
        accounts.require_admin(user)
        pricing.set_price(
            session,
            p.catalog,
            user,
            body.gpu,
            body.price,
            ctx.now,
            body.data_centre,
            body.effective_from,
        )
        lines = pricing.price_list(session, p.catalog, ctx.now)
    return [convert.price_line(line) for line in lines]


@router.post(
    "/credits",
    response_model=schemas.CreditCreated,
    status_code=201,
    responses=IDEMPOTENCY_RESPONSES,
)
def grant_credit(
    body: schemas.CreditCreate,
    ctx: Ctx = Depends(get_ctx),
    idem: Idempotency = Depends(idempotency),
) -> Response:
    """Give a user an SLA or grant credit (spent before cash, optionally only for some GPU
    models, optionally expiring). The same `reference` is granted once."""
    p = ctx.platform
    reference = body.reference or uuid.uuid4().hex

    def grant(session: Session, admin: UserRow) -> schemas.CreditCreated:
        accounts.require_admin(admin)
        user, credit = credits.grant(
            session,
            p.catalog,
            body.email,
            body.kind,
            body.amount,
            reference,
            ctx.now,
            body.expires_at,
            body.gpu_models,
        )
        return schemas.CreditCreated(
            user_id=user.id,
            email=user.email,
            kind=credit.kind,
            amount=credit.amount.display(),
            currency=credit.amount.currency,
            expires_at=credit.expires_at,
            gpu_models=list(credit.gpu_models),
            reference=reference,
        )

    return idem.run_user(ctx, grant, status_code=201)
