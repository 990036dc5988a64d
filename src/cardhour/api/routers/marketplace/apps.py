"""The AI app marketplace: publish, review, list, call (the gateway), earnings and payouts.

The gateway is `POST /apps/{slug}/invoke`: the caller's API key, the input as the JSON body,
an optional `X-Call-Id` header (a call id already charged is refused with 409, so a retry never
runs or charges twice). 402 when the balance does not cover one call, 429 over capacity, 503
when no replica could start, 502 when the app failed (not charged): `core.errors` codes, mapped
to HTTP by the one handler (`api/errors.py`). The gateway itself is `reconcilers/gateway.py`,
reached through the platform; routes here only call services.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from fastapi import APIRouter, Body, Depends, FastAPI, Header, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.routing import Route

from cardhour.api.deps import Ctx, get_ctx, get_platform
from cardhour.api.idempotency import IDEMPOTENCY_RESPONSES, Idempotency, idempotency
from cardhour.api.schemas import marketplace as schemas
from cardhour.core.errors import InvalidInput, Unauthorized
from cardhour.core.money import Money, MoneyError
from cardhour.db.models import AppCallRow, AppRow, PayoutRow, UserRow
from cardhour.services.accounts import users as accounts
from cardhour.services.marketplace import apps, calls
from cardhour.services.marketplace import earnings as app_earnings

router = APIRouter(tags=["apps"])
#: the per-call route's OpenAPI entry (`invoke` serves it)
gateway = APIRouter(tags=["apps"])
GATEWAY_PATH = "/apps/{slug}/invoke"


def _read(ctx: Ctx, session: Session, app: AppRow, live: bool = False) -> schemas.AppRead:
    """The app as its developer sees it (the current version), or as callers do (`live`)."""
    view = apps.view(session, app, live)
    version, m = view.version, view.manifest
    return schemas.AppRead(
        slug=app.slug,
        name=m.name,
        category=m.category,
        description=m.description,
        price_per_call=Money(version.price_micros, ctx.platform.catalog.currency).display(),
        currency=ctx.platform.catalog.currency,
        status=app.status,
        status_reason=app.status_reason,
        version=version.version,
        input_schema=m.input_schema,
        output_schema=m.output_schema,
        resources=m.resources.model_dump(),
        scaling=m.scaling.model_dump(),
        replicas=ctx.platform.gateway.replicas(view.key),
        updated_at=app.updated_at,
    )


@router.post("/apps", response_model=schemas.AppRead, status_code=201)
def publish(body: schemas.AppPublish, ctx: Ctx = Depends(get_ctx)) -> schemas.AppRead:
    """Publish a version (the first creates the app, in `draft`); it becomes current."""
    try:
        code = base64.b64decode(body.code_b64, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput("code_b64 is not base64", field="code_b64") from None
    p = ctx.platform
    with ctx.user_tx() as (session, user):
        app, _ = apps.publish(
            session, user, body.manifest, code, p.app_code_dir, ctx.now, p.catalog.currency
        )
        return _read(ctx, session, app)


@router.get("/apps", response_model=list[schemas.AppRead])
def catalogue(category: str | None = None, ctx: Ctx = Depends(get_ctx)) -> list[schemas.AppRead]:
    """Listed apps (public), by category then slug."""
    with ctx.tx() as session:
        return [_read(ctx, session, app, live=True) for app, _ in apps.catalogue(session, category)]


@router.get("/apps/mine", response_model=list[schemas.AppRead])
def mine(ctx: Ctx = Depends(get_ctx)) -> list[schemas.AppRead]:
    with ctx.user_tx() as (session, user):
        return [_read(ctx, session, app) for app in apps.owned_by(session, user.id)]


@router.get("/apps/{slug}", response_model=schemas.AppRead)
def show(slug: str, ctx: Ctx = Depends(get_ctx)) -> schemas.AppRead:
    with ctx.tx() as session:
        return _read(ctx, session, apps.listed(session, slug), live=True)


@router.post("/apps/{slug}/submit", response_model=schemas.AppRead)
def submit(slug: str, ctx: Ctx = Depends(get_ctx)) -> schemas.AppRead:
    with ctx.user_tx() as (session, user):
        return _read(ctx, session, apps.submit(session, user, slug, ctx.now))


@router.post("/apps/{slug}/rollback", response_model=schemas.AppRead)
def rollback(slug: str, body: schemas.AppRollback, ctx: Ctx = Depends(get_ctx)) -> schemas.AppRead:
    with ctx.user_tx() as (session, user):
        read = _read(ctx, session, apps.rollback(session, user, slug, body.version, ctx.now))
    ctx.platform.gateway.forget()  # the live version moved: calls see it at once
    return read


@router.post("/admin/apps/{slug}/{action}", response_model=schemas.AppRead)
def decide(
    slug: str, action: str, body: schemas.AppDecision, ctx: Ctx = Depends(get_ctx)
) -> schemas.AppRead:
    """`approve`, `reject` (with a reason) or `delist`; admin only."""
    with ctx.user_tx() as (session, user):
        read = _read(ctx, session, apps.decide(session, user, slug, action, body.reason, ctx.now))
    ctx.platform.gateway.forget()
    return read


async def invoke(request: Request) -> Response:
    """`POST /api/v1/apps/{slug}/invoke` as a plain Starlette endpoint, matched before every
    other route (`mount_gateway`): no dependencies to resolve, no body model, one thread hop
    (the call itself); 0.35 ms less per call than the same route through FastAPI here
    (docs/benchmarks/marketplace.md). `invoke_documented` is its OpenAPI entry."""
    scheme, _, api_key = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not api_key.strip():
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    calls.check_size(int(request.headers.get("content-length") or 0))  # before reading it
    payload = calls.parse_input(await request.body())
    gateway = get_platform(request).gateway
    slug, call_key = request.path_params["slug"], request.headers.get("x-call-id")
    done = await run_in_threadpool(gateway.invoke, api_key.strip(), slug, payload, call_key)
    # the output was serialised once, by the gateway: placed in the answer, not encoded again
    fields = {
        "call_id": json.dumps(done.call_id),
        "output": done.output_json,
        "price": json.dumps(done.price.display()),
        "currency": json.dumps(done.price.currency),
        "duration_ms": str(done.duration_ms),
    }
    body = "{" + ",".join(f'"{name}":{value}' for name, value in fields.items()) + "}"
    return Response(body.encode(), media_type="application/json")


@gateway.post(GATEWAY_PATH, response_model=schemas.InvokeRead)
async def invoke_documented(
    slug: str,
    request: Request,
    payload: dict[str, Any] = Body(..., description="The app's input (its input_schema)."),
    x_call_id: str | None = Header(default=None, description="Your idempotency key."),
) -> Response:
    """Call a listed app (the module docstring has the answers). Served by `invoke`."""
    return await invoke(request)


def mount_gateway(app: FastAPI, prefix: str) -> None:
    app.router.routes.insert(0, Route(prefix + GATEWAY_PATH, invoke, methods=["POST"]))
    app.include_router(gateway, prefix=prefix)


def _money(micros: int, currency: str) -> str:
    return Money(micros, currency).exact_str()


@router.get("/developer/earnings", response_model=schemas.EarningsRead)
def earnings(ctx: Ctx = Depends(get_ctx)) -> schemas.EarningsRead:
    cny = ctx.platform.catalog.currency
    with ctx.user_tx() as (session, user):
        e = app_earnings.earnings(session, user.id)
    return schemas.EarningsRead(
        currency=cny,
        calls=e.calls,
        refunded=e.refunded,
        gross=_money(e.gross, cny),
        developer_share=_money(e.developer_share, cny),
        pending=_money(e.pending, cny),
        available=_money(e.available, cny),
        in_payout=_money(e.in_payout, cny),
        paid=_money(e.paid, cny),
    )


def _payout(row: PayoutRow) -> schemas.PayoutRead:
    return schemas.PayoutRead(
        id=row.id,
        amount=_money(row.amount_micros, row.currency),
        currency=row.currency,
        status=row.status,
        requested_at=row.requested_at,
        paid_at=row.paid_at,
        reference=row.reference,
    )


@router.post(
    "/developer/payouts",
    response_model=schemas.PayoutRead,
    status_code=201,
    responses=IDEMPOTENCY_RESPONSES,
)
def request_payout(
    body: schemas.PayoutCreate,
    ctx: Ctx = Depends(get_ctx),
    idem: Idempotency = Depends(idempotency),
) -> Response:
    """Ask to be paid `amount` (omit: everything available). With an `Idempotency-Key`, a
    retry answers the first request instead of asking again."""
    cny = ctx.platform.catalog.currency
    try:
        amount = Money.parse(body.amount, cny) if body.amount is not None else None
    except MoneyError as exc:
        raise InvalidInput(f"amount: {exc}", field="amount") from None
    if amount is not None and amount.micros <= 0:
        raise InvalidInput("amount: more than 0", field="amount")

    def ask(session: Session, user: UserRow) -> schemas.PayoutRead:
        return _payout(app_earnings.request_payout(session, user.id, amount, ctx.now, cny))

    return idem.run_user(ctx, ask, status_code=201)


@router.get("/developer/payouts", response_model=list[schemas.PayoutRead])
def payouts(ctx: Ctx = Depends(get_ctx)) -> list[schemas.PayoutRead]:
    with ctx.user_tx() as (session, user):  # oldest request first
        return [_payout(r) for r in app_earnings.payouts_of(session, user.id)]


@router.post("/admin/payouts/{payout_id}/paid", response_model=schemas.PayoutRead)
def paid(
    payout_id: str, body: schemas.PayoutPaid, ctx: Ctx = Depends(get_ctx)
) -> schemas.PayoutRead:
    with ctx.user_tx() as (session, user):
        accounts.require_admin(user)
        return _payout(app_earnings.mark_paid(session, payout_id, body.reference, ctx.now))


@router.post("/admin/app-calls/{call_id}/refund", response_model=schemas.CallRead)
def refund(call_id: str, ctx: Ctx = Depends(get_ctx)) -> schemas.CallRead:
    """Refund a call within its 7 days (admin): both shares are reversed, the caller is paid
    back in cash."""
    with ctx.user_tx() as (session, user):
        accounts.require_admin(user)
        call: AppCallRow = app_earnings.refund_call(session, call_id, ctx.now)
        return schemas.CallRead(
            id=call.id,
            status=call.status,
            price=_money(call.price_micros, ctx.platform.catalog.currency),
            developer_share=_money(call.developer_micros, ctx.platform.catalog.currency),
            at=call.at,
            refunded_at=call.refunded_at,
        )
