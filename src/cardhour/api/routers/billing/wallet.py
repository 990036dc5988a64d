"""Balance, quotes and the price book."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter, Depends

from cardhour.api import schemas
from cardhour.api.convert import compute as convert
from cardhour.api.deps import Ctx, get_ctx
from cardhour.core.clock import as_utc
from cardhour.core.money import Money
from cardhour.core.states import Plan
from cardhour.services.billing import ledger, pricing, wallet
from cardhour.services.compute import instances

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


@router.post("/quotes", response_model=schemas.QuoteCreated, status_code=201)
def create_quote(body: schemas.QuoteCreate, ctx: Ctx = Depends(get_ctx)) -> schemas.QuoteCreated:
    """A price promised for `billing.quote_validity_seconds`: launch with its id to get it."""
    p = ctx.platform
    validity = timedelta(seconds=p.settings.billing.quote_validity_seconds)
    with ctx.user_tx() as (session, user):
        q = pricing.create_quote(
            session, p.catalog, user, body.gpu, body.count, body.plan, ctx.now, validity
        )
    price = Money(q.price_micros, q.currency)
    monthly = q.plan == Plan.MONTHLY.value
    return schemas.QuoteCreated(
        id=q.id,
        gpu=q.gpu_model,
        count=q.count,
        plan=q.plan,
        currency=q.currency,
        price_per_card_hour=price.display(),
        per_hour=price.times(q.count).display(),
        plan_total=pricing.plan_total(price, q.count).display() if monthly else None,
        valid_until=as_utc(q.valid_until),
    )


@router.get("/prices", response_model=list[schemas.PriceRead])
def prices(ctx: Ctx = Depends(get_ctx)) -> list[schemas.PriceRead]:
    """The price book: what is in force now per GPU model and data centre, and scheduled
    changes. Public, like the offers."""
    with ctx.tx() as session:
        lines = pricing.price_list(session, ctx.platform.catalog, ctx.now)
    return [convert.price_line(line) for line in lines]
