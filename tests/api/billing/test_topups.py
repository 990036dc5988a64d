"""POST /api/v1/admin/topups: admin only, once per reference and per Idempotency-Key."""

from __future__ import annotations

import uuid
from decimal import Decimal

import httpx

from tests.conftest import Api

TOPUPS = "/api/v1/admin/topups"


def _admin(api: Api) -> dict[str, str]:
    email, password = api.platform.bootstrap_admin()
    login = api.client.post("/api/v1/auth/login", json={"email": email, "password": password})
    assert login.status_code == 200, login.text
    return {"Authorization": f"Bearer {login.json()['api_key']}"}


def _signup(api: Api) -> tuple[str, dict[str, str]]:
    email = f"payer-{uuid.uuid4().hex[:8]}@example.com"
    return email, api.signup(email)


def _cash(api: Api, headers: dict[str, str]) -> Decimal:
    """The exact balance (cash + trial credit): only cash moves in these tests."""
    r = api.client.get("/api/v1/balance", headers=headers)
    assert r.status_code == 200, r.text
    return Decimal(r.json()["available_exact"])


def _top_up(
    api: Api, admin: dict[str, str], key: str | None = None, **body: object
) -> httpx.Response:
    headers = {**admin, "Idempotency-Key": key} if key else admin
    return api.client.post(TOPUPS, headers=headers, json=body)


def test_admin_top_up_credits_cash_once_per_reference(api: Api) -> None:
    admin = _admin(api)
    email, user = _signup(api)
    before = _cash(api, user)
    r = _top_up(api, admin, email=email.upper(), amount="100.00", reference="bank-1")
    assert r.status_code == 201, r.text
    me = api.client.get("/api/v1/auth/me", headers=user).json()
    assert r.json() == {
        "user_id": me["id"],
        "email": email,
        "amount": "100.00",
        "currency": "CNY",
        "reference": "bank-1",
        "transfer_id": "topup:bank-1",
    }
    assert _cash(api, user) == before + 100
    again = _top_up(api, admin, email=email, amount="100.00", reference="bank-1")
    assert (again.status_code, again.json()) == (201, r.json())
    assert _cash(api, user) == before + 100
    other = _top_up(api, admin, email=email, amount="99.00", reference="bank-1")
    assert (other.status_code, other.json()["error"]["code"]) == (409, "conflict")
    assert _cash(api, user) == before + 100


def test_without_a_reference_one_is_made_up_and_the_key_prevents_a_second_credit(
    api: Api,
) -> None:
    admin = _admin(api)
    email, user = _signup(api)
    before = _cash(api, user)
    first = _top_up(api, admin, "retry-1", email=email, amount="0.000001")
    assert first.status_code == 201, first.text
    reference = first.json()["reference"]
    assert reference.startswith("admin-") and first.json()["transfer_id"] == f"topup:{reference}"
    assert first.json()["amount"] == "0.000001"
    again = _top_up(api, admin, "retry-1", email=email, amount="0.000001")
    assert (again.status_code, again.content) == (201, first.content)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert _cash(api, user) == before + Decimal("0.000001")
    reused = _top_up(api, admin, "retry-1", email=email, amount="5")
    assert (reused.status_code, reused.json()["error"]["code"]) == (409, "idempotency_key_reused")
    # no key, no reference: every call is a new top-up
    for _ in range(2):
        assert _top_up(api, admin, email=email, amount="1").status_code == 201
    assert _cash(api, user) == before + Decimal("2.000001")


def test_top_up_needs_the_admin_role(api: Api) -> None:
    email, user = _signup(api)
    before = _cash(api, user)
    r = _top_up(api, user, email=email, amount="100")
    assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden")
    r = _top_up(api, user, "k", email=email, amount="100")
    assert r.status_code == 403
    assert api.client.post(TOPUPS, json={"email": email, "amount": "1"}).status_code == 401
    assert _cash(api, user) == before


def test_bad_input(api: Api) -> None:
    admin = _admin(api)
    email, user = _signup(api)
    before = _cash(api, user)
    r = _top_up(api, admin, email="nobody@example.com", amount="1")
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
    for amount in (
        "0",
        "-1",
        "0.0000001",
        "abc",
        "1e3",
        "NaN",
        "Infinity",
        "1000000000.000001",
        "1e999999999",
        "",
        100,
        None,
    ):
        r = _top_up(api, admin, email=email, amount=amount)
        assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_input"), amount
    for reference in ("", "r" * 101, "ref\n", "réf"):
        r = _top_up(api, admin, email=email, amount="1", reference=reference)
        assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_input"), reference
    assert _cash(api, user) == before
    r = _top_up(api, admin, email=email, amount="1000000000", reference="max")
    assert (r.status_code, r.json()["amount"]) == (201, "1000000000.00")
