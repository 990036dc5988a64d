"""Balance."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from cardhour.api import schemas
from cardhour.api.deps import Ctx, get_ctx
from cardhour.core.money import Money
from cardhour.services import instances, ledger, wallet

router = APIRouter(tags=["billing"])


@router.get("/balance", response_model=schemas.BalanceRead)
def balance(ctx: Ctx = Depends(get_ctx)) -> schemas.BalanceRead:
    currency = ctx.platform.catalog.currency
    with ctx.user_tx() as (session, user):
        bal = wallet.balance(session, user.id, currency, ctx.now)
        committed = instances.committed_hour(session, user.id) or Money.zero(currency)
        low = user.low_balance_since
    return schemas.BalanceRead(
        currency=currency,
        available=bal.available.floor_str(),
        cash=bal.cash.floor_str(),
        trial_credit=bal.credit_of(ledger.TRIAL).floor_str(),
        credits=[
            schemas.CreditRead(
                kind=c.kind,
                balance=c.balance.floor_str(),
                expires_at=c.expires_at,
                gpu_models=list(c.gpu_models),
                expired=c.expired,
            )
            for c in bal.credits
        ],
        held=bal.held.floor_str(),
        committed_per_hour=committed.display(),
        available_exact=bal.available.exact_str(),
        low_balance_since=low,
    )
