"""Payment-provider webhooks: HMAC signatures and event bodies. Pure: no database, no clock.

Signature scheme (Stripe style, docs/dev/payments.md): the provider sends

    Cardhour-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + raw body)>

with one or more `v1=` entries (several while a secret is being rotated); any match passes.
The signed timestamp must be within the tolerance of the server clock, so a captured request
cannot be replayed later; replays inside the window are harmless because a `payment.succeeded`
event is credited once per event id.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, Field, StrictStr, ValidationError

from cardhour.core.errors import BadSignature, InvalidInput

HEADER = "Cardhour-Signature"
SCHEME = "v1"
DEFAULT_TOLERANCE_SECONDS = 300
PAYMENT_SUCCEEDED = "payment.succeeded"
_MAX_TIMESTAMP_DIGITS = 12
M = TypeVar("M", bound=BaseModel)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """Hex HMAC-SHA256 of `"<timestamp>." + body` under `secret`."""
    message = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The `Cardhour-Signature` header value a provider sends for `body` at `timestamp`."""
    return f"t={timestamp},{SCHEME}={signature(secret, timestamp, body)}"


@dataclass(frozen=True)
class SignatureHeader:
    timestamp: int
    signatures: tuple[str, ...]  # the v1 entries; other schemes are ignored


def parse_header(value: str | None) -> SignatureHeader:
    """Split `t=…,v1=…[,v1=…]`; raises BadSignature when it is missing or malformed."""
    if not value:
        raise BadSignature(f"missing {HEADER} header")
    timestamp: int | None = None
    found: list[str] = []
    for item in value.split(","):
        name, sep, content = item.partition("=")
        name, content = name.strip(), content.strip()
        if not sep:
            raise BadSignature(f"malformed {HEADER} header")
        if name == "t":
            ok = content.isascii() and content.isdigit() and len(content) <= _MAX_TIMESTAMP_DIGITS
            if timestamp is not None or not ok:
                raise BadSignature(f"malformed timestamp in {HEADER} header")
            timestamp = int(content)
        elif name == SCHEME:
            found.append(content)
    if timestamp is None:
        raise BadSignature(f"no timestamp (t=) in {HEADER} header")
    if not found:
        raise BadSignature(f"no {SCHEME} signature in {HEADER} header")
    return SignatureHeader(timestamp, tuple(found))


def verify(
    secret: str,
    header: str | None,
    body: bytes,
    now: datetime,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
) -> int:
    """Check the header against the raw body; returns the signed timestamp.

    Raises BadSignature when the header is missing or malformed, no `v1` entry matches (compared
    in constant time), or the timestamp is more than `tolerance_seconds` from `now`.
    """
    parsed = parse_header(header)
    expected = signature(secret, parsed.timestamp, body).encode()
    if not any(
        hmac.compare_digest(expected, candidate.lower().encode("utf-8", "replace"))
        for candidate in parsed.signatures
    ):
        raise BadSignature("signature does not match: wrong secret or altered body")
    if abs(now.timestamp() - parsed.timestamp) > tolerance_seconds:
        raise BadSignature(
            f"signature timestamp outside the tolerance of {tolerance_seconds} s "
            "(check the clocks, or the event is a replay)"
        )
    return parsed.timestamp


class _Event(BaseModel):
    id: StrictStr = Field(min_length=1, max_length=100)
    type: StrictStr = Field(min_length=1, max_length=100)
    data: dict[str, Any] = {}


class _PaymentData(BaseModel):
    email: StrictStr = Field(min_length=1, max_length=320)
    amount: StrictStr = Field(min_length=1, max_length=40)
    currency: StrictStr = Field(min_length=1, max_length=3)


@dataclass(frozen=True)
class PaymentEvent:
    id: str
    type: str
    data: dict[str, Any]


@dataclass(frozen=True)
class PaymentSucceeded:
    event_id: str
    email: str
    amount: str  # decimal string, checked where it is credited
    currency: str


def parse_event(body: bytes) -> PaymentEvent:
    """The event envelope `{"id", "type", "data"}`; raises InvalidInput for anything else.

    The id must be 1-100 printable ASCII characters: it becomes the ledger reference.
    """
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise InvalidInput("the event body is not JSON") from exc
    event = _validated(_Event, raw, "event")
    if not (event.id.isascii() and event.id.isprintable()):
        raise InvalidInput("event id: must be printable ASCII")
    return PaymentEvent(event.id, event.type, event.data)


def payment_succeeded(event: PaymentEvent) -> PaymentSucceeded:
    """The data of a `payment.succeeded` event; raises InvalidInput when a field is missing."""
    data = _validated(_PaymentData, event.data, "data")
    return PaymentSucceeded(event.id, data.email.strip(), data.amount, data.currency.upper())


def _validated(model: type[M], raw: object, where: str) -> M:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join([where, *(str(p) for p in first["loc"])])
        raise InvalidInput(f"{path}: {first['msg']}") from exc
