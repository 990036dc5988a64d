"""The steps of one app call that read or decide, with no I/O of their own: the gateway
(`reconcilers/gateway.py`) runs them around the app's call, in its own short read transactions,
and keeps their answers in its caches (docs/dev/marketplace.md).

- `parse_input`: the call's input, a JSON object of at most `MAX_INPUT_BYTES` (the API's invoke
  route and the console's try-it form both check it here);
- `caller_of` / `check_unexpired`: whose API key it is, and whether it is still valid;
- `live_app`: the listed app's live version, as a call needs it;
- `check_not_charged`: a call id already recorded is refused (409);
- `check_covers`: a caller whose spendable cash (`earnings.spendable`) does not cover one call
  is refused (402): calls are paid in cash, not credits;
- `output_of`: what the caller pays for, a 2xx answer whose output is JSON (else `AppFailed`,
  not charged);
- `new_call` and `recorded`: the call's row for the gateway's one INSERT
  (`store.marketplace.calls.record_statement`), and whether an INSERT whose answer was lost
  landed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.errors import (
    AppFailed,
    Conflict,
    InsufficientBalance,
    InvalidInput,
    TooLarge,
    Unauthorized,
)
from cardhour.core.money import Money
from cardhour.core.replicas import AppSpec, CallResult
from cardhour.services.accounts import users as accounts
from cardhour.services.marketplace import apps, earnings
from cardhour.store.marketplace import calls as store

#: an input's limit; a replica's runner has the same (`backends.apps.runner.MAX_BODY`)
MAX_INPUT_BYTES = 10 * 1024 * 1024


def check_size(length: int) -> None:
    """TooLarge when an input of `length` bytes is over `MAX_INPUT_BYTES`."""
    if length > MAX_INPUT_BYTES:
        raise TooLarge(f"body: at most {MAX_INPUT_BYTES // 1_000_000} MB")


def parse_input(raw: bytes) -> dict[str, Any]:
    """The call's input: TooLarge over `MAX_INPUT_BYTES`, InvalidInput unless it is a JSON
    object (nesting too deep for the parser is not JSON either)."""
    check_size(len(raw))
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError):
        raise InvalidInput("body: the input is not JSON", field="body") from None
    if not isinstance(payload, dict):
        raise InvalidInput("body: the input must be a JSON object", field="body")
    return payload


@dataclass(frozen=True)
class Caller:
    user_id: str
    expires_at: datetime | None  # the key's (a console session's); None: it does not expire


def caller_of(session: Session, api_key: str, now: datetime) -> Caller:
    """Whose key it is; Unauthorized when it is unknown, revoked or expired."""
    user, row = accounts.authenticate_key(session, api_key, now)
    return Caller(user.id, row.expires_at)


def check_unexpired(caller: Caller, now: datetime) -> None:
    """Unauthorized once the key read earlier has expired."""
    if caller.expires_at is not None and as_utc(caller.expires_at) <= now:
        raise Unauthorized("session expired: sign in again")


@dataclass(frozen=True)
class LiveApp:
    """A listed app's live version, as calls need it."""

    app_id: str
    developer_id: str
    version: int
    price_micros: int
    spec: AppSpec


def live_app(session: Session, slug: str, code_dir: Path) -> LiveApp:
    """The app's live version; NotFound unless the app is listed."""
    app = apps.listed(session, slug)
    version = apps.live_of(session, app)
    spec = apps.spec_of(code_dir, app, version)
    return LiveApp(app.id, app.developer_id, version.version, version.price_micros, spec)


def check_not_charged(session: Session, caller_id: str, call_key: str) -> None:
    """Conflict when the caller's call id was recorded (charged) before."""
    done = earnings.call_by_key(session, caller_id, call_key)
    if done is not None:
        raise Conflict(
            f"call id {call_key!r} was already charged (call {done.id})", field="call_id"
        )


def check_covers(available: int, price: Money) -> None:
    """InsufficientBalance when `available` cash (micro-units) does not cover one call."""
    if available >= price.micros:
        return
    currency = price.currency
    shown = Money(max(available, 0), currency)
    raise InsufficientBalance(
        f"cash {shown.floor_str()} {currency} does not cover one call "
        f"({price.display()} {currency}); app calls are paid in cash (top up), not with credits",
        needed=price.display(),
        available=shown.floor_str(),
    )


def output_of(result: CallResult) -> str:
    """The output as the caller gets it, serialised once while checked: AppFailed unless the
    app answered 2xx with JSON (NaN or Infinity are not)."""
    if not 200 <= result.status < 300:
        body = result.body
        reason = body.get("error") if isinstance(body, dict) else None
        raise AppFailed(f"the app failed ({result.status}): {reason or 'no reason given'}")
    try:  # what the caller will get must be JSON before they pay for it
        return json.dumps(result.body, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        raise AppFailed("the app's output is not JSON (NaN or Infinity)") from None


def new_call(
    live: LiveApp, caller_id: str, call_key: str, duration_ms: int, now: datetime, developer_bp: int
) -> dict[str, object]:
    """The parameters of the call's INSERT (`earnings.call_row`: its split, not yet settled)."""
    call = earnings.NewCall(
        live.app_id, live.version, caller_id, live.developer_id, call_key, live.price_micros,
        duration_ms,
    )  # fmt: skip
    return earnings.call_row(call, now, developer_bp)


def recorded(session: Session, call_id: str) -> bool:
    """Whether the call's row is there (an INSERT whose connection dropped may have landed)."""
    return store.call_exists(session, call_id)
