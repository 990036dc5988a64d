"""Bugs the billing state machine (test_billing_stateful.py) found, shrunk to plain tests.

Each was `xfail(strict=True)` until fixed; now each guards its fix.
"""

from __future__ import annotations

from datetime import timedelta

from cardhour.db.engine import transaction
from cardhour.services.billing import pricing
from cardhour.store.accounts import users as user_store
from tests.conftest import Api


def _set_price(api: Api, gpu: str, price: str, after_seconds: int) -> None:
    email, _ = api.platform.bootstrap_admin()
    now = api.clock.now()
    with transaction(api.platform.sessions) as s:
        admin = user_store.get_user_by_email(s, email)
        assert admin is not None
        when = now + timedelta(seconds=after_seconds)
        pricing.set_price(s, api.platform.catalog, admin, gpu, price, now, effective_from=when)


def _launch_a800(api: Api) -> dict[str, str]:
    headers = api.signup()
    api.top_up(headers, "100")
    r = api.client.post("/api/v1/instances", headers=headers, json={"gpu": "A800", "name": "p"})
    assert r.status_code == 201, r.text
    api.settle()  # placed at 1.20; the simulator takes 30 s to bring it up
    assert api.client.get("/api/v1/instances/p", headers=headers).json()["status"] == (
        "provisioning"
    )
    return headers


def test_a_price_change_while_it_provisions_applies_once_it_runs(api: Api) -> None:
    headers = _launch_a800(api)
    _set_price(api, "A800", "12.00", after_seconds=10)  # in force 20 s before it runs
    api.settle(30)
    assert api.client.get("/api/v1/instances/p", headers=headers).json()["status"] == "running"
    api.settle(3600)
    got = api.client.get("/api/v1/instances/p", headers=headers).json()
    assert got["cost_so_far"] == "12.000000"  # one hour at 12.00 (charged: 1.20)


def test_a_price_change_at_the_instant_it_starts_running_applies(api: Api) -> None:
    headers = _launch_a800(api)
    api.settle(30)
    assert api.client.get("/api/v1/instances/p", headers=headers).json()["status"] == "running"
    _set_price(api, "A800", "12.00", after_seconds=0)  # from the second it started running
    api.settle(3600)
    got = api.client.get("/api/v1/instances/p", headers=headers).json()
    assert got["cost_so_far"] == "12.000000"  # one hour at 12.00 (charged: 1.20)
