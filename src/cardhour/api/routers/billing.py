"""Balance."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from cardhour.api import schemas
from cardhour.api.deps import Ctx, get_ctx
from cardhour.core.money import Money
from cardhour.services import instances, ledger

router = APIRouter(tags=["billing"])


@router.get("/balance", response_model=schemas.BalanceRead)
def balance(ctx: Ctx = Depends(get_ctx)) -> schemas.BalanceRead:
    currency = ctx.platform.catalog.currency
    with ctx.user_tx() as (session, user):
        bal = ledger.balance(session, user.id, currency)
        committed = instances.committed_hour(session, user.id) or Money.zero(currency)
    return schemas.BalanceRead(
        currency=currency,
        available=bal.total.floor_str(),
        cash=bal.cash.floor_str(),
        trial_credit=bal.trial_credit.floor_str(),
        committed_per_hour=committed.display(),
        available_exact=bal.total.exact_str(),
    )
