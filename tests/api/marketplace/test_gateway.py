"""The marketplace gateway's fast path on both databases (reconcilers/gateway.py): calls are
recorded with one statement and posted to the ledger in batches; a caller's concurrent calls
cannot spend more cash than they have; a call id runs once at a time; its caches go on serving
while they are read again and follow a delisting or a revoked key."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import create_engine, select, text

from cardhour.db.engine import normalise_url, transaction
from cardhour.db.models import AppCallRow, LedgerTransferRow
from cardhour.reconcilers import gateway
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import ledger
from cardhour.services.marketplace import apps
from cardhour.services.marketplace import earnings as app_earnings
from tests.api.marketplace.test_marketplace import MANIFEST, _admin, _package
from tests.conftest import Api

SLOW = {"query": "find the contract", "sleep": 0.8}


def _listed(api: Api) -> tuple[dict[str, str], dict[str, str]]:
    """A listed doc-search app (0.02 CNY a call, at most 2 replicas of 1 call each) and a
    caller's headers."""
    dev, caller, admin = api.signup(), api.signup(), _admin(api)
    r = api.client.post(
        "/api/v1/apps", headers=dev, json={"manifest": MANIFEST, "code_b64": _package()}
    )
    assert r.status_code == 201, r.text
    api.client.post("/api/v1/apps/doc-search/submit", headers=dev)
    assert api.client.post(
        "/api/v1/admin/apps/doc-search/approve", headers=admin, json={}
    ).is_success
    return caller, admin


def _invoke(api: Api, headers: dict[str, str], body: dict[str, object] | None = None) -> int:
    r = api.client.post(
        "/api/v1/apps/doc-search/invoke", headers=headers, json=body or {"query": "a b"}
    )
    return r.status_code


def test_calls_are_recorded_then_posted_in_one_batch(api: Api) -> None:
    caller, _ = _listed(api)
    api.top_up(caller, "1")
    assert [_invoke(api, caller) for _ in range(2)] == [200, 200]
    r = api.client.post(
        "/api/v1/apps/doc-search/invoke", headers=caller, json={"query": "東京 h100"}
    )
    assert r.json()["output"] == {"words": 2, "upper": "東京 H100"}  # the answer is JSON as sent
    assert (r.json()["price"], r.json()["currency"]) == ("0.02", "CNY")
    with transaction(api.platform.sessions) as s:
        calls = s.scalars(select(AppCallRow)).all()
        assert len(calls) == 3 and all(c.settled_at is None for c in calls)
        caller_id = calls[0].caller_id
        assert app_earnings.spendable(s, caller_id) == 940_000  # counted before posting
    assert api.client.get("/api/v1/balance", headers=caller).json()["cash"] == "1.00"
    api.settle()  # the apps reconciler posts them
    with transaction(api.platform.sessions) as s:
        assert all(c.settled_at is not None for c in s.scalars(select(AppCallRow)))
        kinds = s.scalars(
            select(LedgerTransferRow.kind).where(LedgerTransferRow.kind.like("app_%"))
        )
        assert sorted(kinds) == ["app_call", "app_fee", "app_share"]  # one batch
        assert app_earnings.spendable(s, caller_id) == 940_000
        assert ledger.verify(s).balanced
    assert api.client.get("/api/v1/balance", headers=caller).json()["cash"] == "0.94"


def test_concurrent_calls_cannot_spend_more_cash_than_there_is(api: Api) -> None:
    caller, _ = _listed(api)
    api.top_up(caller, "0.04")  # two calls' worth
    with ThreadPoolExecutor(3) as pool:
        codes = sorted(pool.map(lambda _: _invoke(api, caller, SLOW), range(3)))
    assert codes == [200, 200, 402]
    api.settle()
    with transaction(api.platform.sessions) as s:
        user = accounts.authenticate(s, caller["Authorization"].split()[1], api.clock.now())
        assert ledger.balance_of(ledger.store.get_account(s, ledger.user_key(user.id, "cash"))) == 0
        assert ledger.verify(s).balanced


def test_a_call_id_runs_once_at_a_time_and_is_charged_once(api: Api) -> None:
    caller, _ = _listed(api)
    api.top_up(caller, "1")
    same = {**caller, "X-Call-Id": "order-7"}
    with ThreadPoolExecutor(2) as pool:
        codes = sorted(pool.map(lambda _: _invoke(api, same, SLOW), range(2)))
    assert codes == [200, 409]
    assert _invoke(api, same) == 409  # charged: a retry neither runs nor charges
    with transaction(api.platform.sessions) as s:
        assert s.scalar(select(AppCallRow.call_key)) == "order-7"
        assert len(s.scalars(select(AppCallRow)).all()) == 1


def test_a_delisting_here_is_seen_at_once(api: Api) -> None:
    caller, admin = _listed(api)
    api.top_up(caller, "1")
    assert _invoke(api, caller) == 200  # the app is cached now
    r = api.client.post(
        "/api/v1/admin/apps/doc-search/delist", headers=admin, json={"reason": "gone"}
    )
    assert r.is_success
    assert _invoke(api, caller) == 404


def test_stale_entries_serve_while_read_again_then_follow_the_database(api: Api) -> None:
    """A change made elsewhere (another process: here the services, without `forget`): the
    gateway serves its entry until a read on its refresher thread finds the change. Ages are
    measured on the platform's clock: the test moves it, nothing sleeps."""
    caller, _ = _listed(api)
    other = api.signup()  # a key the gateway has not read yet
    api.top_up(caller, "1")
    assert _invoke(api, caller) == 200
    with transaction(api.platform.sessions) as s:
        admin = accounts.get_user(s, _admin_id(api))
        assert admin
        apps.decide(s, admin, "doc-search", "delist", "elsewhere", api.clock.now())
        accounts.revoke(s, caller["Authorization"].split()[1], api.clock.now())
    assert _invoke(api, caller) == 200  # young entries serve as they are
    api.clock.advance(gateway.KEY_TTL)  # key and app past their TTL, within STALE_LIMIT of it
    assert _invoke(api, caller) == 200  # stale: served, and read again meanwhile
    api.platform.gateway.wait_refreshed()
    assert _invoke(api, caller) == 401  # the key read again is revoked: gone for good
    assert _invoke(api, other) == 404  # and the app read again is delisted
    api.clock.advance(gateway.STALE_LIMIT * gateway.KEY_TTL)
    assert _invoke(api, caller) == 401
    with transaction(api.platform.sessions) as s:
        assert len(s.scalars(select(AppCallRow)).all()) == 3  # the stale calls were charged


def test_an_entry_too_old_to_serve_is_read_on_the_calls_path(api: Api) -> None:
    """Past `STALE_LIMIT` times its TTL an entry does not serve while read again: the call
    reads it itself and sees the change at once."""
    caller, _ = _listed(api)
    api.top_up(caller, "1")
    assert _invoke(api, caller) == 200
    with transaction(api.platform.sessions) as s:
        accounts.revoke(s, caller["Authorization"].split()[1], api.clock.now())
    api.clock.advance(gateway.STALE_LIMIT * gateway.KEY_TTL)
    assert _invoke(api, caller) == 401


def _admin_id(api: Api) -> str:
    email, password = api.platform.bootstrap_admin()
    with transaction(api.platform.sessions) as s:
        return accounts.sign_in(s, email, password).id


def test_a_connection_the_database_dropped_is_opened_again(api: Api) -> None:
    if api.platform.statements.dialect.name != "postgresql":
        pytest.skip("PostgreSQL: SQLite has no server to drop connections")
    caller, _ = _listed(api)
    api.top_up(caller, "1")
    assert _invoke(api, caller) == 200  # the gateway's connection is pooled now
    url = normalise_url(str(api.platform.statements.url.render_as_string(hide_password=False)))
    killer = create_engine(url, isolation_level="AUTOCOMMIT")
    with killer.connect() as conn:
        dropped = conn.execute(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        ).scalar()
    killer.dispose()
    assert dropped and dropped >= 1
    assert _invoke(api, caller) == 200
    with transaction(api.platform.sessions) as s:
        assert len(s.scalars(select(AppCallRow)).all()) == 2


def test_bad_calls_get_clear_errors_and_the_route_is_documented(api: Api) -> None:
    caller, _ = _listed(api)
    url = "/api/v1/apps/doc-search/invoke"
    cases = [
        ({}, b"{}", 401, "unauthorized"),
        (caller, b"{not json", 422, "invalid_input"),
        (caller, b"[1, 2]", 422, "invalid_input"),
        ({**caller, "X-Call-Id": "x" * 129}, b"{}", 422, "invalid_input"),
    ]
    for headers, body, status, code in cases:
        r = api.client.post(
            url, headers={**headers, "Content-Type": "application/json"}, content=body
        )
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), r.text
    assert api.client.post("/api/v1/apps/nope/invoke", headers=caller, json={}).status_code == 404
    spec = api.client.get("/openapi.json").json()["paths"]["/api/v1/apps/{slug}/invoke"]["post"]
    assert "X-Call-Id" in {p["name"].title() for p in spec["parameters"]}


def test_an_app_whose_requirements_are_not_installed_does_not_start(api: Api) -> None:
    dev, caller, admin = api.signup(), api.signup(), _admin(api)
    manifest = MANIFEST.replace("[numpy]", "[numpy, not-a-package-here==1.0]")
    body = {"manifest": manifest, "code_b64": _package()}
    assert api.client.post("/api/v1/apps", headers=dev, json=body).status_code == 201
    api.client.post("/api/v1/apps/doc-search/submit", headers=dev)
    api.client.post("/api/v1/admin/apps/doc-search/approve", headers=admin, json={})
    api.top_up(caller, "1")
    r = api.client.post("/api/v1/apps/doc-search/invoke", headers=caller, json={"query": "x"})
    assert r.status_code == 503
    message = r.json()["error"]["message"]
    assert "its requirements not-a-package-here==1.0 are not available here" in message
    with transaction(api.platform.sessions) as s:
        assert s.scalars(select(AppCallRow)).all() == []  # not charged


def test_dropping_the_caches_keeps_the_reservations_of_running_calls(api: Api) -> None:
    """A review decision or a sign-out drops the caches while calls run: those calls' money
    stays reserved (review finding: a caller could overspend by signing out meanwhile)."""
    caller, _ = _listed(api)
    api.top_up(caller, "0.04")  # two calls' worth
    assert _invoke(api, caller) == 200
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(_invoke, api, caller, SLOW)
        time.sleep(0.3)  # the slow call has reserved its price
        api.platform.gateway.forget()
        assert _invoke(api, caller) == 402
        assert running.result() == 200
    api.settle()
    with transaction(api.platform.sessions) as s:
        user = accounts.authenticate(s, caller["Authorization"].split()[1], api.clock.now())
        assert app_earnings.spendable(s, user.id) == 0


def test_an_output_that_is_not_json_is_a_failed_call(api: Api) -> None:
    dev, caller, admin = api.signup(), api.signup(), _admin(api)
    nan = "def handle(request):\n    return {'score': float('nan')}\n"
    body = {"manifest": MANIFEST, "code_b64": _package(nan)}
    assert api.client.post("/api/v1/apps", headers=dev, json=body).status_code == 201
    api.client.post("/api/v1/apps/doc-search/submit", headers=dev)
    api.client.post("/api/v1/admin/apps/doc-search/approve", headers=admin, json={})
    api.top_up(caller, "1")
    r = api.client.post("/api/v1/apps/doc-search/invoke", headers=caller, json={})
    assert r.status_code == 502 and r.json()["error"]["code"] == "app_failed", r.text
    with transaction(api.platform.sessions) as s:
        assert s.scalars(select(AppCallRow)).all() == []  # not charged


def test_oversized_and_pathological_bodies_are_refused(api: Api) -> None:
    caller, _ = _listed(api)
    url = "/api/v1/apps/doc-search/invoke"
    headers = {**caller, "Content-Type": "application/json"}
    deep = b"[" * 100_000 + b"]" * 100_000
    r = api.client.post(url, headers=headers, content=deep)
    assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_input")
    huge = b'{"x": "' + b"a" * (11 * 1024 * 1024) + b'"}'
    r = api.client.post(url, headers=headers, content=huge)
    assert (r.status_code, r.json()["error"]["code"]) == (413, "too_large")
