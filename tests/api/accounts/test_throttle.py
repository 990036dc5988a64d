"""Sign-in and sign-up throttling (services/accounts/throttle.py): too many failures lock the
account, or the client address, with 429 `too_many_attempts` and `Retry-After`, the right
password included, for longer each time; a success clears the account's count; an unknown
email costs a password check like a known one; operators read the locks."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from argon2 import PasswordHasher
from fastapi.testclient import TestClient

from cardhour.services.accounts import users as accounts
from tests.conftest import Api

PASSWORD = "password123"


def _login(api: Api, email: str, password: str) -> Any:
    return api.client.post("/api/v1/auth/login", json={"email": email, "password": password})


def _admin(api: Api) -> dict[str, str]:
    email, password = api.platform.bootstrap_admin()
    r = _login(api, email, password)
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['api_key']}"}


def test_an_account_is_locked_after_ten_failures_longer_each_time(api: Api) -> None:
    api.signup("victim@example.com", PASSWORD)
    for _ in range(10):
        assert _login(api, "victim@example.com", "wrong-guess").status_code == 401
    locked = _login(api, "victim@example.com", PASSWORD)  # the right one, too
    assert locked.status_code == 429, locked.text
    assert locked.json()["error"]["code"] == "too_many_attempts"
    assert locked.headers["Retry-After"] == "60"
    api.settle(61)
    assert _login(api, "victim@example.com", PASSWORD).status_code == 200  # clears the count
    for _ in range(9):
        assert _login(api, "victim@example.com", "wrong-guess").status_code == 401
    assert _login(api, "victim@example.com", PASSWORD).status_code == 200  # 9: not locked
    for _ in range(10):
        _login(api, "victim@example.com", "wrong-guess")
    assert _login(api, "victim@example.com", PASSWORD).headers["Retry-After"] == "60"
    api.settle(61)
    for _ in range(10):  # the second lock in a row (no success between): twice as long
        _login(api, "victim@example.com", "wrong-guess")
    assert _login(api, "victim@example.com", PASSWORD).headers["Retry-After"] == "120"


def test_one_address_spraying_many_accounts_is_locked(api: Api) -> None:
    api.signup("someone@example.com", PASSWORD)
    admin = _admin(api)  # signed in before: the address is locked for everyone on it after
    for i in range(30):  # one guess each at 30 accounts, none of them locked on its own
        assert _login(api, f"guess{i}@example.com", "password").status_code == 401
    sprayed = _login(api, "someone@example.com", PASSWORD)
    assert sprayed.status_code == 429 and sprayed.headers["Retry-After"] == "60"
    events = api.client.get("/api/v1/admin/auth-events", headers=admin)
    assert events.status_code == 200, events.text
    assert [(e["kind"], e["key"]) for e in events.json()] == [("locked", "address:testclient")]
    assert "30 failed attempts" in events.json()[0]["detail"]


def test_refused_sign_ups_count_and_events_are_admin_only(api: Api) -> None:
    user = api.signup("taken@example.com", PASSWORD)
    for _ in range(10):
        r = api.client.post(
            "/api/v1/auth/signup", json={"email": "taken@example.com", "password": PASSWORD}
        )
        assert r.status_code == 409
    r = api.client.post(
        "/api/v1/auth/signup", json={"email": "taken@example.com", "password": PASSWORD}
    )
    assert r.status_code == 429 and int(r.headers["Retry-After"]) == 60
    assert api.client.get("/api/v1/admin/auth-events", headers=user).status_code == 403
    assert api.client.get("/api/v1/admin/auth-events").status_code == 401


def test_an_unknown_email_costs_a_password_check(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    api.signup("known@example.com", PASSWORD)
    checks: list[str] = []

    class Counted(PasswordHasher):
        def verify(self, hash: str | bytes, password: str | bytes) -> Literal[True]:
            checks.append(str(password))
            return super().verify(hash, password)

    cheap = accounts._hasher
    monkeypatch.setattr(
        accounts, "_hasher", Counted(cheap.time_cost, cheap.memory_cost, cheap.parallelism)
    )
    assert _login(api, "known@example.com", "wrong-guess").status_code == 401
    assert _login(api, "nobody@example.com", "wrong-guess").status_code == 401
    assert checks == ["wrong-guess", "wrong-guess"]  # the same work for both


def test_the_console_sign_in_is_throttled_too(api: Api) -> None:
    api.signup("console@example.com", PASSWORD)
    for _ in range(10):
        page = api.client.post(
            "/signin", data={"email": "console@example.com", "password": "wrong-guess"}
        )
        assert page.status_code == 401
    page = api.client.post("/signin", data={"email": "console@example.com", "password": PASSWORD})
    assert page.status_code == 429 and page.headers["Retry-After"] == "60"
    assert "too many failed attempts" in page.text


def test_the_session_cookie_is_secure_over_https(api: Api) -> None:
    api.signup("cookie@example.com", PASSWORD)
    form = {"email": "cookie@example.com", "password": PASSWORD}
    plain = api.client.post("/signin", data=form, follow_redirects=False)
    assert plain.status_code == 303 and "secure" not in plain.headers["set-cookie"].lower()
    https = TestClient(api.client.app, base_url="https://testserver")
    signed = https.post("/signin", data=form, follow_redirects=False)
    assert signed.status_code == 303 and "; secure" in signed.headers["set-cookie"].lower()


def test_concurrent_failures_all_count(api: Api) -> None:
    """Ten wrong passwords at once, from eight threads: each one counted (the count is read
    and written under its row's lock), so the next attempt finds the account locked."""
    from concurrent.futures import ThreadPoolExecutor

    api.signup("rushed@example.com", PASSWORD)
    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda _: _login(api, "rushed@example.com", "nope-nope").status_code,
                              range(10)))  # fmt: skip
    assert sorted(set(codes)) == [401]
    assert _login(api, "rushed@example.com", PASSWORD).status_code == 429
