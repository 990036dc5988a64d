"""The payment provider's webhook: signed events, no API key (docs/dev/payments.md)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request

from cardhour.api import schemas
from cardhour.api.deps import Ctx, get_ctx
from cardhour.core.errors import InvalidInput, NotConfigured
from cardhour.services.billing import payments, topups

router = APIRouter(prefix="/payments", tags=["payments"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": schemas.ErrorRead, "description": "`bad_signature`"},
    404: {"model": schemas.ErrorRead, "description": "no account with the event's email"},
    422: {"model": schemas.ErrorRead, "description": "not JSON, a field missing, wrong currency"},
    503: {"model": schemas.ErrorRead, "description": "`not_configured`: no webhook secret set"},
}
_EVENT_SCHEMA = {
    "type": "object",
    "required": ["id", "type"],
    "properties": {
        "id": {"type": "string", "examples": ["evt_1234"]},
        "type": {"type": "string", "examples": [payments.PAYMENT_SUCCEEDED]},
        "data": {
            "type": "object",
            "description": "For payment.succeeded: email, amount (decimal string), currency.",
        },
    },
}


async def raw_body(request: Request) -> bytes:
    """The body exactly as sent: the signature covers these bytes, not a re-encoding."""
    return await request.body()


@router.post(
    "/webhook",
    response_model=schemas.PaymentWebhookRead,
    responses=_ERRORS,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _EVENT_SCHEMA}},
        }
    },
)
def webhook(
    body: bytes = Depends(raw_body),
    signature: Annotated[
        str | None,
        Header(
            alias=payments.HEADER,
            description="t=<unix seconds>,v1=<hex HMAC-SHA256(secret, '<t>.' + body)>",
        ),
    ] = None,
    ctx: Ctx = Depends(get_ctx),
) -> schemas.PaymentWebhookRead:
    """Receive an event. `payment.succeeded` credits the account's cash once per event id (a
    redelivery answers `duplicate: true`); other event types are acknowledged and ignored.

    The provider retries anything but a 2xx, so errors are for events that may succeed later
    (404: the account does not exist yet) or that need a person (400, 422, 503)."""
    settings = ctx.platform.settings.payments
    if not settings.webhook_secret:
        raise NotConfigured(
            "payment webhooks are not configured: set CARDHOUR_PAYMENTS__WEBHOOK_SECRET"
        )
    payments.verify(
        settings.webhook_secret, signature, body, ctx.now, settings.webhook_tolerance_seconds
    )
    event = payments.parse_event(body)
    if event.type != payments.PAYMENT_SUCCEEDED:
        return schemas.PaymentWebhookRead(ignored=True)
    paid = payments.payment_succeeded(event)
    currency = ctx.platform.catalog.currency
    if paid.currency != currency:
        raise InvalidInput(f"data.currency: this deployment takes {currency}, not {paid.currency}")
    amount = topups.parse_amount(paid.amount, currency)
    with ctx.tx() as session:
        done = topups.top_up_by_email(
            session, paid.email, amount, ctx.now, reference=f"payment:{paid.event_id}"
        )
    return schemas.PaymentWebhookRead(duplicate=done.duplicate)
