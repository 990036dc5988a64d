"""POST /api/v1/payments/webhook: signed events credit cash once per event id (both databases)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from cardhour.api.app import create_app
from cardhour.core.clock import ManualClock
from cardhour.platform import Platform
from cardhour.services.billing.payments import sign
from cardhour.settings import Settings
from tests.conftest import Api

SECRET = "whsec_test"
WEBHOOK = "/api/v1/payments/webhook"


@pytest.fixture
def paid_api(database_url: str, tmp_path: Path, clock: ManualClock) -> Iterator[Api]:
    """The `api` fixture's platform with a webhook secret configured."""
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        sim={"provision_seconds": 30},
        reconcilers={"autostop_margin_seconds": 10},
        payments={"webhook_secret": SECRET},
    )
    platform = Platform(settings, clock=clock)
    with TestClient(create_app(platform)) as client:
        yield Api(client, platform, clock)
    platform.stop()


def _event(email: str, amount: str = "100.00", **changes: object) -> dict[str, object]:
    event: dict[str, object] = {
        "id": f"evt_{uuid.uuid4().hex[:12]}",
        "type": "payment.succeeded",
        "data": {"email": email, "amount": amount, "currency": "CNY"},
    }
    return {**event, **changes}


def _deliver(
    api: Api,
    body: bytes | dict[str, object],
    secret: str = SECRET,
    signed_body: bytes | None = None,
    at: int | None = None,
) -> httpx.Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    t = int(api.clock.now().timestamp()) if at is None else at
    header = sign(secret, raw if signed_body is None else signed_body, t)
    return api.client.post(
        WEBHOOK,
        content=raw,
        headers={"Content-Type": "application/json", "Cardhour-Signature": header},
    )


def _balance(api: Api, headers: dict[str, str]) -> Decimal:
    r = api.client.get("/api/v1/balance", headers=headers)
    assert r.status_code == 200, r.text
    return Decimal(r.json()["available_exact"])


def _user(api: Api) -> tuple[str, dict[str, str]]:
    email = f"payer-{uuid.uuid4().hex[:8]}@example.com"
    return email, api.signup(email)


def test_a_signed_payment_credits_once_and_redelivery_moves_nothing(paid_api: Api) -> None:
    api = paid_api
    email, user = _user(api)
    before = _balance(api, user)
    event = _event(email, "100.00")
    r = _deliver(api, event)
    assert (r.status_code, r.json()) == (
        200,
        {"received": True, "duplicate": False, "ignored": False},
    )
    assert _balance(api, user) == before + 100
    api.clock.advance(60)  # the provider retries later, signing again
    again = _deliver(api, event)
    assert (again.status_code, again.json()["duplicate"]) == (200, True)
    assert _balance(api, user) == before + 100
    # the same event id with another amount is a conflict, not a second credit
    changed = _deliver(api, {**event, "data": {"email": email, "amount": "5", "currency": "CNY"}})
    assert (changed.status_code, changed.json()["error"]["code"]) == (409, "conflict")
    assert _balance(api, user) == before + 100


def test_concurrent_redeliveries_credit_once(paid_api: Api) -> None:
    api = paid_api
    email, user = _user(api)
    before = _balance(api, user)
    event = _event(email, "7.50")
    with ThreadPoolExecutor(max_workers=6) as pool:
        codes = list(pool.map(lambda _: _deliver(api, event).status_code, range(12)))
    assert codes == [200] * 12
    assert _balance(api, user) == before + Decimal("7.50")


def test_bad_signatures_are_400_and_move_nothing(paid_api: Api) -> None:
    api = paid_api
    email, user = _user(api)
    before = _balance(api, user)
    event = json.dumps(_event(email, "100.00")).encode()
    now = int(api.clock.now().timestamp())
    tampered = event.replace(b"100.00", b"900.00")
    cases = {
        "tampered body": _deliver(api, tampered, signed_body=event),
        "wrong secret": _deliver(api, event, secret="whsec_other"),
        "stale": _deliver(api, event, at=now - 301),
        "from the future": _deliver(api, event, at=now + 301),
        "missing": api.client.post(WEBHOOK, content=event),
        "malformed": api.client.post(
            WEBHOOK, content=event, headers={"Cardhour-Signature": "v1=abc"}
        ),
    }
    for why, r in cases.items():
        assert (r.status_code, r.json()["error"]["code"]) == (400, "bad_signature"), why
    assert _balance(api, user) == before
    ok = _deliver(api, event, at=now - 300)  # inside the tolerance
    assert ok.status_code == 200
    assert _balance(api, user) == before + 100


def test_without_a_secret_the_webhook_is_503(api: Api) -> None:
    email, user = _user(api)
    before = _balance(api, user)
    r = _deliver(api, _event(email))
    assert (r.status_code, r.json()["error"]["code"]) == (503, "not_configured")
    assert "CARDHOUR_PAYMENTS__WEBHOOK_SECRET" in r.json()["error"]["message"]
    assert _balance(api, user) == before


def test_other_events_are_acknowledged_and_ignored(paid_api: Api) -> None:
    api = paid_api
    email, user = _user(api)
    before = _balance(api, user)
    r = _deliver(api, _event(email, type="payment.refunded"))
    assert (r.status_code, r.json()) == (
        200,
        {"received": True, "duplicate": False, "ignored": True},
    )
    assert _balance(api, user) == before


def test_bad_events_are_4xx_and_move_nothing(paid_api: Api) -> None:
    api = paid_api
    email, user = _user(api)
    before = _balance(api, user)
    cases = [
        (b"{not json", 422, "invalid_input"),
        (b'{"type": "payment.succeeded"}', 422, "invalid_input"),
        (_event(email, data={"email": email, "amount": "1"}), 422, "invalid_input"),
        (
            _event(email, data={"email": email, "amount": "1", "currency": "USD"}),
            422,
            "invalid_input",
        ),
        (_event(email, "-5"), 422, "invalid_input"),
        (_event(email, "1.0000001"), 422, "invalid_input"),
        (_event(email, "1e9"), 422, "invalid_input"),
        (_event("nobody@example.com"), 404, "not_found"),
    ]
    for body, status, code in cases:
        r = _deliver(api, body)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), body
    assert _balance(api, user) == before
