"""Prices, quotes, monthly plans, credits and the low-balance warning, through the API."""

from __future__ import annotations

from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal

from cardhour.db.engine import transaction
from cardhour.services.billing import ledger
from tests.conftest import Api

MICRO = Decimal("0.000001")


def _admin(api: Api) -> dict[str, str]:
    email, password = api.platform.bootstrap_admin()
    r = api.client.post("/api/v1/auth/login", json={"email": email, "password": password})
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['api_key']}"}


def _launch(api: Api, headers: dict[str, str], **body: object) -> dict:
    r = api.client.post("/api/v1/instances", headers=headers, json={"gpu": "H100", **body})
    assert r.status_code == 201, r.text
    return r.json()


def _get(api: Api, headers: dict[str, str], ident: str) -> dict:
    return api.client.get(f"/api/v1/instances/{ident}", headers=headers).json()


def _balance(api: Api, headers: dict[str, str]) -> dict:
    return api.client.get("/api/v1/balance", headers=headers).json()


def _run(api: Api, seconds: int, step: int = 30) -> None:
    """Advance like a live server: the reconcilers run at least every `step` seconds."""
    for _ in range(seconds // step):
        api.settle(step)
    if seconds % step:
        api.settle(seconds % step)


def _verified(api: Api) -> None:
    with transaction(api.platform.sessions) as s:
        check = ledger.verify(s)
    assert check.balanced, check.problems


def test_a_price_change_applies_to_usage_after_it(api: Api) -> None:
    admin, user = _admin(api), api.signup()
    inst = _launch(api, user, name="p")
    api.settle()
    api.settle(30)  # running from here
    assert _get(api, user, "p")["status"] == "running"
    change_at = api.clock.now() + timedelta(seconds=100)
    body = {"gpu": "H100", "price": "3.80", "effective_from": change_at.isoformat()}
    r = api.client.post("/api/v1/admin/prices", headers=admin, json=body)
    assert r.status_code == 201, r.text
    assert {(p["on_demand"], p["current"]) for p in r.json() if p["gpu"] == "H100"} == {
        ("1.90", True),
        ("3.80", False),
    }
    _run(api, 300)
    api.client.post("/api/v1/instances/p/stop", headers=user)
    api.settle()
    exact = (Decimal(100) * Decimal("1.90") + Decimal(200) * Decimal("3.80")) / 3600
    cost = Decimal(_get(api, user, inst["id"])["cost_so_far"])
    assert cost == exact.quantize(MICRO, ROUND_HALF_UP)
    assert _balance(api, user)["held"] == "0.00"
    # in the past, for an unknown model, or by a non-admin: refused
    past = (api.clock.now() - timedelta(seconds=1)).isoformat()
    bad = {"gpu": "H100", "price": "2", "effective_from": past}
    assert api.client.post("/api/v1/admin/prices", headers=admin, json=bad).status_code == 422
    bad = {"gpu": "B300", "price": "2"}
    assert api.client.post("/api/v1/admin/prices", headers=admin, json=bad).status_code == 422
    ok = {"gpu": "H100", "price": "2"}
    assert api.client.post("/api/v1/admin/prices", headers=user, json=ok).status_code == 403
    _verified(api)


def test_a_quote_is_honoured_for_its_validity(api: Api) -> None:
    admin, user = _admin(api), api.signup()
    r = api.client.post("/api/v1/quotes", headers=user, json={"gpu": "H100", "count": 2})
    assert r.status_code == 201, r.text
    quote = r.json()
    assert (quote["price_per_card_hour"], quote["per_hour"]) == ("1.90", "3.80")
    r = api.client.post(
        "/api/v1/admin/prices", headers=admin, json={"gpu": "H100", "price": "2.50"}
    )
    assert r.status_code == 201
    honoured = _launch(api, user, count=2, name="q", quote_id=quote["id"])
    api.settle()
    assert _get(api, user, "q")["price_per_card_hour"] == "1.90"
    assert honoured["held"] == "3.800000"
    unquoted = api.client.post("/api/v1/quotes", headers=user, json={"gpu": "H100"}).json()
    assert unquoted["price_per_card_hour"] == "2.50"
    api.clock.advance(901)  # the default validity is 15 minutes
    r = api.client.post(
        "/api/v1/instances",
        headers=user,
        json={"gpu": "H100", "name": "late", "quote_id": unquoted["id"]},
    )
    assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_input")
    assert "expired" in r.json()["error"]["message"]
    other = api.signup()  # another user's quote is not found
    r = api.client.post(
        "/api/v1/instances", headers=other, json={"gpu": "H100", "quote_id": quote["id"]}
    )
    assert r.status_code == 404


def test_monthly_plan_is_prepaid_keeps_its_gpus_and_stops_at_expiry(api: Api) -> None:
    user = api.signup()
    api.top_up(user, "1000")
    inst = _launch(api, user, name="m", plan="monthly")
    # held up front: 720 h × 1.235 (1.90 less 35%)
    assert inst["held"] == "889.200000"
    api.settle()
    api.settle(30)
    running = _get(api, user, "m")
    assert running["status"] == "running" and running["plan"] == "monthly"
    assert running["price_per_card_hour"] == "1.235"
    assert Decimal(running["held"]) == 0
    bal = _balance(api, user)
    assert Decimal(bal["available_exact"]) == Decimal("1010") - Decimal("889.2")
    r = api.client.post("/api/v1/instances/m/stop", headers=user)
    assert (r.status_code, r.json()["error"]["code"]) == (409, "invalid_transition")
    assert "monthly plan" in r.json()["error"]["message"]
    api.settle(3600 * 24 * 10)  # no per-second charges while the plan runs
    assert Decimal(_get(api, user, "m")["cost_so_far"]) == 0
    api.settle(3600 * 24 * 20)
    api.settle()
    ended = _get(api, user, inst["id"])
    assert ended["status"] == "stopped" and ended["plan"] == "on_demand"
    assert any("monthly plan ended" in (e["reason"] or "") for e in ended["events"])
    assert Decimal(_balance(api, user)["available_exact"]) == Decimal("1010") - Decimal("889.2")
    _verified(api)


def test_monthly_plan_can_carry_on_on_demand(api: Api) -> None:
    user = api.signup()
    api.top_up(user, "1000")
    _launch(api, user, name="m", plan="monthly", at_expiry="on_demand")
    api.settle()
    api.settle(30)
    api.settle(3600 * 24 * 30 + 20)  # the plan ended 20 s before this pass: billed from its end
    inst = _get(api, user, "m")
    assert inst["status"] == "running" and inst["plan"] == "on_demand"
    assert inst["price_per_card_hour"] == "1.90"
    api.client.post("/api/v1/instances/m/stop", headers=user)  # on demand now: it may stop
    api.settle()
    inst = _get(api, user, "m")
    assert inst["status"] == "stopped"
    expected = (Decimal(20) * Decimal("1.90") / 3600).quantize(MICRO, ROUND_HALF_UP)
    assert Decimal(inst["cost_so_far"]) == expected
    _verified(api)


def test_the_owner_is_warned_then_stopped_after_the_grace_period(api: Api) -> None:
    user = api.signup()  # 10.00 trial credit
    _launch(api, user, name="w", count=4)  # 7.60/h: 7.60 held
    api.settle()
    api.settle(30)
    _run(api, 4680, step=10)  # 4,680 s: 9.88 used, 0.12 left: under a minute (0.1267)
    bal = _balance(api, user)
    assert bal["low_balance_since"] is not None
    inst = _get(api, user, "w")
    assert inst["status"] == "running"
    assert any("balance low" in (e["reason"] or "") for e in inst["events"])
    console = api.client.get("/", headers=user)
    assert console.status_code == 200
    _run(api, 40, step=5)  # past the 30 s grace
    stopped = _get(api, user, "w")
    assert stopped["status"] == "stopped"
    assert "balance exhausted" in stopped["events"][-2]["reason"]
    bal = _balance(api, user)
    assert bal["low_balance_since"] is None
    minute = Decimal("7.60") / 60
    assert Decimal(bal["cash"]) >= -minute  # never more than a minute below zero
    _verified(api)


def test_a_top_up_clears_the_warning(api: Api) -> None:
    user = api.signup()
    _launch(api, user, name="t", count=4)
    api.settle()
    api.settle(30)
    _run(api, 4680, step=10)
    assert _balance(api, user)["low_balance_since"] is not None
    api.top_up(user, "100")
    _run(api, 60, step=5)
    assert _balance(api, user)["low_balance_since"] is None
    assert _get(api, user, "t")["status"] == "running"


def test_admin_credits_are_spent_before_cash_and_only_for_their_models(api: Api) -> None:
    admin, user = _admin(api), api.signup()
    email = api.client.get("/api/v1/auth/me", headers=user).json()["email"]
    grant = {
        "email": email,
        "kind": "grant_credit",
        "amount": "100",
        "gpu_models": ["H100"],
        "reference": "lab-7",
    }
    r = api.client.post("/api/v1/admin/credits", headers=admin, json=grant)
    assert r.status_code == 201, r.text
    again = api.client.post("/api/v1/admin/credits", headers=admin, json=grant)
    assert again.status_code == 201  # the same reference is granted once
    assert api.client.post("/api/v1/admin/credits", headers=user, json=grant).status_code == 403
    bad = {**grant, "kind": "cash"}
    assert api.client.post("/api/v1/admin/credits", headers=admin, json=bad).status_code == 422
    credits = _balance(api, user)["credits"]
    assert sorted((c["kind"], c["balance"]) for c in credits) == [
        ("grant_credit", "100.00"),
        ("trial_credit", "10.00"),
    ]
    _launch(api, user, name="h", count=8)  # 15.20 held from the H100 grant (spent first)
    _launch(api, user, gpu="A800", count=8, name="a")  # 9.60 held from the trial credit
    credits = {c["kind"]: c["balance"] for c in _balance(api, user)["credits"]}
    assert credits == {"grant_credit": "84.80", "trial_credit": "0.40"}
    r = api.client.post("/api/v1/instances", headers=user, json={"gpu": "A800", "name": "b"})
    assert r.status_code == 402  # 1.20 for an A800: the grant is only for H100
    _verified(api)


def test_a_restart_gives_an_unused_credit_hold_back_to_the_credit(api: Api) -> None:
    """The second run's hold came from a grant: what is left of it goes back to the grant, not
    to the cash that funded the first run (found by the statements work)."""
    admin, user = _admin(api), api.signup()
    email = api.client.get("/api/v1/auth/me", headers=user).json()["email"]
    api.top_up(user, "100")
    api.clock.advance(days=31)
    api.settle()  # the trial credit expired
    _launch(api, user, name="r")  # held from cash
    api.settle()
    api.settle(30)
    _run(api, 3600, step=60)
    api.client.post("/api/v1/instances/r/stop", headers=user)
    api.settle()
    grant = {"email": email, "kind": "grant_credit", "amount": "5", "reference": "g"}
    assert api.client.post("/api/v1/admin/credits", headers=admin, json=grant).status_code == 201
    assert api.client.post("/api/v1/instances/r/start", headers=user).status_code == 200
    api.settle()
    api.settle(30)
    _run(api, 60)
    api.client.post("/api/v1/instances/r/stop", headers=user)
    api.settle()
    credits = {c["kind"]: c for c in _balance(api, user)["credits"]}
    spent = (Decimal(60) * Decimal("1.90") / 3600).quantize(MICRO, ROUND_HALF_UP)
    assert Decimal(credits["grant_credit"]["balance"]) == (Decimal(5) - spent).quantize(
        Decimal("0.01"), rounding="ROUND_FLOOR"
    )
    _verified(api)


def test_a_monthly_plan_stopped_before_it_began_holds_the_30_days_again(api: Api) -> None:
    """Found in review: a restart held one on-demand hour, then the plan overdrew cash."""
    user = api.signup()
    api.top_up(user, "880")  # 890 in all: one plan (889.20), not two
    _launch(api, user, name="m1", plan="monthly")
    api.client.post("/api/v1/instances/m1/stop", headers=user)  # still pending: allowed
    assert _balance(api, user)["held"] == "0.00"
    _launch(api, user, name="m2", plan="monthly")
    r = api.client.post("/api/v1/instances/m1/start", headers=user)
    assert (r.status_code, r.json()["error"]["code"]) == (402, "insufficient_balance")
    assert "30-day plan" in r.json()["error"]["message"]
    api.settle()
    api.settle(30)
    assert Decimal(_balance(api, user)["cash"]) >= 0
    _verified(api)


def test_what_a_monthly_hold_did_not_need_goes_back_when_the_plan_starts(api: Api) -> None:
    """Found in review: a launch holds the dearest data centre's plan; the rest was kept held."""
    admin, user = _admin(api), api.signup()
    body = {"gpu": "H100", "price": "5.00", "data_centre": "wh1"}
    assert api.client.post("/api/v1/admin/prices", headers=admin, json=body).status_code == 201
    api.top_up(user, "3000")
    inst = _launch(api, user, name="m", plan="monthly")
    assert inst["held"] == "2340.000000"  # 720 h × 5.00 less 35 %
    api.settle()
    api.settle(30)
    running = _get(api, user, "m")
    plan = Decimal(running["price_per_card_hour"]) * 720
    assert Decimal(running["held"]) == 0
    assert Decimal(_balance(api, user)["available_exact"]) == Decimal("3010") - plan
    _verified(api)


def test_a_plan_that_ended_unseen_bills_only_until_the_stop(api: Api) -> None:
    """Found in review: a plan that ended between two metering passes, then a stop and a start,
    billed the days the instance was stopped."""
    user = api.signup()
    api.top_up(user, "1000")
    _launch(api, user, name="m", plan="monthly", at_expiry="on_demand")
    api.settle()
    api.settle(30)
    api.clock.advance(days=30, seconds=10)  # the plan ended 10 s ago; no pass has run since
    assert api.client.post("/api/v1/instances/m/stop", headers=user).status_code == 200
    api.settle()
    stopped = _get(api, user, "m")
    ten_seconds = (Decimal(10) * Decimal("1.90") / 3600).quantize(MICRO, ROUND_HALF_UP)
    assert (stopped["status"], stopped["plan"]) == ("stopped", "on_demand")
    assert Decimal(stopped["cost_so_far"]) == ten_seconds
    api.clock.advance(days=5)
    assert api.client.post("/api/v1/instances/m/start", headers=user).status_code == 200
    api.settle()
    api.settle(30)
    api.client.post("/api/v1/instances/m/stop", headers=user)
    api.settle()
    assert Decimal(_get(api, user, "m")["cost_so_far"]) == ten_seconds  # nothing for 5 days
    _verified(api)
