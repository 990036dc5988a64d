"""The marketplace gateway's work for one call (`POST /api/v1/apps/{slug}/invoke`):

1. in a transaction: the listed app, its live (approved) version, and whether the caller's cash
   covers its price (a caller whose cash does not is refused before the app runs: 402; calls
   are paid in cash, not credits, `services.app_earnings`);
2. with no transaction open: the call on a replica (`backends.apps.runtime`: routed to the least
   busy one, a cold start waited for, 429 over capacity, 503 when no replica can start);
3. in a transaction, only when the app answered 2xx: the charge and the split
   (`services.app_earnings.charge_call`, idempotent per call id). A failed call is not charged.

A call id already charged is refused before anything runs (409), so a retry after the first was
charged neither runs nor charges again; two requests with the same id at the same moment may
both run, and only one is charged. Without a call id each request is a call of its own. Cash
spent meanwhile by another call can still make the charge refuse after the app ran (402, not
charged).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from cardhour.backends.apps.runtime import AppSpec, LocalAppRuntime
from cardhour.core.clock import Clock
from cardhour.core.errors import CardhourError, Conflict, InsufficientBalance
from cardhour.core.money import Money
from cardhour.db.engine import transaction
from cardhour.services import accounts, app_earnings, apps
from cardhour.services.ids import new_id


class AppFailed(CardhourError):
    """The app itself failed the call (not charged)."""

    code = "app_failed"
    http_status = 502


@dataclass(frozen=True)
class Invoked:
    call_id: str
    output: Any
    price: Money
    duration_ms: int


def invoke(
    sessions: sessionmaker[Session],
    clock: Clock,
    runtime: LocalAppRuntime,
    code_dir: Path,
    currency: str,
    developer_bp: int,
    api_key: str,
    slug: str,
    payload: dict[str, Any],
    call_key: str | None,
) -> Invoked:
    key = call_key or new_id()
    app_earnings.check_call_key(key)
    with transaction(sessions) as session:
        caller = accounts.authenticate(session, api_key, clock.now())
        app = apps.listed(session, slug)
        version = apps.live_of(session, app)
        manifest = apps.manifest_of(version)
        if call_key is not None and (done := app_earnings.call_by_key(session, caller.id, key)):
            raise Conflict(f"call id {key!r} was already charged (call {done.id})", field="call_id")
        price = Money(version.price_micros, currency)
        cash = Money(max(app_earnings.cash_of(session, caller.id), 0), currency)
        if cash.micros < price.micros:  # the same rule as the charge: cash only
            raise InsufficientBalance(
                f"cash {cash.floor_str()} {currency} does not cover one call "
                f"({price.display()} {currency}); app calls are paid in cash (top up), not with "
                "credits",
                needed=price.display(),
                available=cash.floor_str(),
            )
        spec = AppSpec(
            f"{app.id}:{version.version}",
            apps.package_path(code_dir, app.id, version.code_sha256),
            manifest.entrypoint,
            manifest.scaling,
        )
        caller_id = caller.id
    result = runtime.call(spec, payload)
    if not 200 <= result.status < 300:
        reason = result.body.get("error") if isinstance(result.body, dict) else None
        raise AppFailed(f"the app failed ({result.status}): {reason or 'no reason given'}")
    with transaction(sessions) as session:  # `app` and `version` as read: their fields do not move
        call = app_earnings.charge_call(
            session, app, version, caller_id, key, clock.now(), currency, result.duration_ms,
            developer_bp,
        )  # fmt: skip
        return Invoked(call.id, result.body, price, result.duration_ms)
