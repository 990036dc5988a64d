"""The app marketplace end to end through the REST API (both databases): a developer publishes
an app, the operator lists it, another account calls it through the gateway; replicas are real
local processes that start from zero, rise under load and fall back after idling; the caller
is charged per call and the developer's 70% is pending, available after 7 days, paid out; a
refunded call reverses its split; the ledger stays balanced."""

from __future__ import annotations

import base64
import io
import zipfile
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

from cardhour.db.engine import transaction
from cardhour.services.billing import ledger
from tests.conftest import Api
from tests.core.test_apps import GOOD

APP = """
import time


def handle(request):
    time.sleep(float(request.get("sleep", 0)))
    words = request["query"].split()
    if "boom" in words:
        raise RuntimeError("boom")
    return {"words": len(words), "upper": request["query"].upper()}
"""


def _package(code: str = APP) -> str:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("app.py", code)
    return base64.b64encode(out.getvalue()).decode()


def _admin(api: Api) -> dict[str, str]:
    email, password = api.platform.bootstrap_admin()
    r = api.client.post("/api/v1/auth/login", json={"email": email, "password": password})
    return {"Authorization": f"Bearer {r.json()['api_key']}"}


MANIFEST = (
    GOOD.replace("resources: {gpu: H100, milli_gpu: 250, memory_gb: 8}\n", "")
    .replace(
        "max_replicas: 4, target_concurrency: 4, idle_seconds: 300",
        "max_replicas: 2, target_concurrency: 1, idle_seconds: 60",
    )
    .replace("[sentence-transformers==3.0.1]", "[numpy]")  # installed here: replicas start
)


def test_publish_list_call_scale_charge_mature_payout_refund(api: Api) -> None:
    dev, caller, admin = api.signup(), api.signup(), _admin(api)
    body = {"manifest": MANIFEST, "code_b64": _package()}
    r = api.client.post("/api/v1/apps", headers=dev, json=body)
    assert r.status_code == 201, r.text
    assert (r.json()["status"], r.json()["version"], r.json()["replicas"]) == ("draft", 1, 0)
    bad = api.client.post("/api/v1/apps", headers=dev, json={**body, "code_b64": "@@"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_input"
    wrong = {**body, "manifest": MANIFEST.replace('"0.02"', '"0.0000001"')}
    shown = api.client.post("/api/v1/apps", headers=dev, json=wrong).json()["error"]
    assert shown["message"].startswith("price_per_call: at most 6 decimals")

    api.top_up(caller, "1")  # calls are paid in cash, not with the trial credit
    call = {"query": "find the contract"}
    assert (
        api.client.post("/api/v1/apps/doc-search/invoke", headers=caller, json=call).status_code
        == 404
    )
    assert (
        api.client.post("/api/v1/apps/doc-search/submit", headers=dev).json()["status"]
        == "in_review"
    )
    assert (
        api.client.post("/api/v1/admin/apps/doc-search/approve", headers=dev, json={}).status_code
        == 403
    )
    listed = api.client.post("/api/v1/admin/apps/doc-search/approve", headers=admin, json={})
    assert listed.json()["status"] == "listed"
    catalogue = api.client.get("/api/v1/apps", params={"category": "rag"}).json()
    assert [(a["slug"], a["price_per_call"]) for a in catalogue] == [("doc-search", "0.02")]

    # the first call starts a replica from zero and waits for it
    r = api.client.post(
        "/api/v1/apps/doc-search/invoke", headers={**caller, "X-Call-Id": "c-1"}, json=call
    )
    assert r.status_code == 200, r.text
    first = r.json()
    assert first["output"] == {"words": 3, "upper": "FIND THE CONTRACT"}
    assert (first["price"], first["currency"]) == ("0.02", "CNY")
    again = api.client.post(
        "/api/v1/apps/doc-search/invoke", headers={**caller, "X-Call-Id": "c-1"}, json=call
    )
    assert again.status_code == 409  # a call id is charged once: a retry does not run again
    failed = api.client.post(
        "/api/v1/apps/doc-search/invoke", headers=caller, json={"query": "boom"}
    )
    assert failed.status_code == 502 and "RuntimeError: boom" in failed.json()["error"]["message"]
    assert api.client.get("/api/v1/apps/doc-search").json()["replicas"] == 1

    # load: two calls at once on target_concurrency 1 → a second replica; a third at once is 429
    def slow(_: int) -> int:
        return api.client.post(
            "/api/v1/apps/doc-search/invoke", headers=caller, json={**call, "sleep": 1.5}
        ).status_code

    with ThreadPoolExecutor(3) as pool:
        codes = sorted(pool.map(slow, range(3)))
    assert codes == [200, 200, 429], codes
    assert api.client.get("/api/v1/apps/doc-search").json()["replicas"] == 2
    api.settle(30)
    assert api.client.get("/api/v1/apps/doc-search").json()["replicas"] == 2  # not idle long
    api.settle(61)
    assert api.client.get("/api/v1/apps/doc-search").json()["replicas"] == 0  # scaled to zero

    balance = api.client.get("/api/v1/balance", headers=caller).json()
    assert Decimal(balance["cash"]) == Decimal("1") - 3 * Decimal("0.02")
    earnings = api.client.get("/api/v1/developer/earnings", headers=dev).json()
    assert (earnings["calls"], earnings["pending"], earnings["available"]) == (
        3,
        "0.042000",
        "0.000000",
    )

    # a refund within 7 days reverses the split
    with transaction(api.platform.sessions) as s:
        from cardhour.db.models import AppCallRow

        first_call = s.get(AppCallRow, first["call_id"])
        assert first_call is not None and first_call.call_key == "c-1"
    assert (
        api.client.post(
            f"/api/v1/admin/app-calls/{first['call_id']}/refund", headers=dev
        ).status_code
        == 403
    )
    refunded = api.client.post(f"/api/v1/admin/app-calls/{first['call_id']}/refund", headers=admin)
    assert refunded.json()["status"] == "refunded"
    assert api.client.get("/api/v1/developer/earnings", headers=dev).json()["pending"] == "0.028000"

    api.settle(7 * 24 * 3600)  # the 7 days pass: the reconciler makes the shares available
    earnings = api.client.get("/api/v1/developer/earnings", headers=dev).json()
    assert (earnings["pending"], earnings["available"]) == ("0.000000", "0.028000")
    late = api.client.post(f"/api/v1/admin/app-calls/{first['call_id']}/refund", headers=admin)
    assert late.status_code == 200  # already refunded: the same answer
    keyed = {**dev, "Idempotency-Key": "payout-1"}
    payout = api.client.post("/api/v1/developer/payouts", headers=keyed, json={})
    assert payout.status_code == 201 and payout.json()["amount"] == "0.028000"
    retried = api.client.post("/api/v1/developer/payouts", headers=keyed, json={})
    assert retried.json() == payout.json()  # the same key: asked for once
    assert retried.headers["Idempotent-Replayed"] == "true"
    none_left = api.client.post("/api/v1/developer/payouts", headers=dev, json={})
    assert none_left.status_code == 409
    paid = api.client.post(
        f"/api/v1/admin/payouts/{payout.json()['id']}/paid",
        headers=admin,
        json={"reference": "b-1"},
    )
    assert paid.json()["status"] == "paid"
    earnings = api.client.get("/api/v1/developer/earnings", headers=dev).json()
    assert (earnings["available"], earnings["in_payout"], earnings["paid"]) == (
        "0.000000",
        "0.000000",
        "0.028000",
    )
    with transaction(api.platform.sessions) as s:
        assert ledger.verify(s).balanced


def test_a_caller_who_cannot_pay_is_refused_before_the_app_runs(api: Api) -> None:
    dev, caller, admin = api.signup(), api.signup(), _admin(api)
    dear = MANIFEST.replace('"0.02"', '"25"')
    api.client.post("/api/v1/apps", headers=dev, json={"manifest": dear, "code_b64": _package()})
    api.client.post("/api/v1/apps/doc-search/submit", headers=dev)
    api.client.post("/api/v1/admin/apps/doc-search/approve", headers=admin, json={})
    r = api.client.post("/api/v1/apps/doc-search/invoke", headers=caller, json={"query": "x"})
    assert (
        r.status_code == 402
        and "does not cover one call (25.00 CNY)" in r.json()["error"]["message"]
    )
    assert api.client.get("/api/v1/apps/doc-search").json()["replicas"] == 0  # nothing started
