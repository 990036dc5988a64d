"""The marketplace gateway's work for one call (`POST /api/v1/apps/{slug}/invoke`):

1. in a transaction: the listed app, its current version, and whether the caller can pay its
   price (a caller who cannot is refused before the app runs: 402);
2. with no transaction open: the call on a replica (`backends.apps.runtime`: routed to the least
   busy one, a cold start waited for, 429 over capacity, 503 when no replica can start);
3. in a transaction, only when the app answered 2xx: the charge and the split
   (`services.app_earnings.charge_call`, idempotent per call id). A failed call is not charged.

A call id already charged is refused before anything runs (409), so a retried request never runs
or charges twice; without a call id each request is a call of its own.
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
from cardhour.services import accounts, app_earnings, apps, wallet
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
    with transaction(sessions) as session:
        caller = accounts.authenticate(session, api_key, clock.now())
        app = apps.listed(session, slug)
        version = apps.version_of(session, app)
        manifest = apps.manifest_of(version)
        if call_key is not None and (done := app_earnings.call_by_key(session, caller.id, key)):
            raise Conflict(f"call id {key!r} was already charged (call {done.id})", field="call_id")
        price = Money(version.price_micros, currency)
        have = wallet.balance(session, caller.id, currency, clock.now()).available
        if have.micros < price.micros:
            raise InsufficientBalance(
                f"available balance {have.floor_str()} {currency} does not cover one call "
                f"({price.display()} {currency})",
                needed=price.display(),
                available=have.floor_str(),
            )
        spec = AppSpec(
            f"{app.id}:{version.version}",
            code_dir / app.id / f"{version.version}.zip",
            manifest.entrypoint,
            manifest.scaling,
        )
        app_id, caller_id, number = app.id, caller.id, version.version
    result = runtime.call(spec, payload)
    if not 200 <= result.status < 300:
        reason = result.body.get("error") if isinstance(result.body, dict) else None
        raise AppFailed(f"the app failed ({result.status}): {reason or 'no reason given'}")
    with transaction(sessions) as session:
        app = apps.by_id(session, app_id)
        version = apps.version_of(session, app, number)
        call = app_earnings.charge_call(
            session, app, version, caller_id, key, clock.now(), currency, result.duration_ms,
            developer_bp,
        )  # fmt: skip
        return Invoked(call.id, result.body, price, result.duration_ms)
