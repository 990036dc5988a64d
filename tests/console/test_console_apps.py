"""The developer's dashboard in the console (no browser): their apps, calls, revenue, pending,
available, paid; a payout asked for from the page once earnings are available."""

from __future__ import annotations

import base64
import re

from fastapi.testclient import TestClient

from cardhour.api.app import create_app
from cardhour.core.clock import ManualClock
from cardhour.core.money import Money
from cardhour.db.engine import transaction
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import customers, ledger
from cardhour.services.marketplace import apps
from cardhour.services.marketplace import earnings as app_earnings
from tests.api.marketplace.test_marketplace import MANIFEST, _package


def _cell(html: str, testid: str) -> str:
    found = re.search(rf'data-testid="{testid}">([^<]*)<', html)
    assert found, testid
    return found.group(1)


def test_developer_dashboard_and_payout(platform: Platform, clock: ManualClock) -> None:
    with TestClient(create_app(platform)) as dev:
        r = dev.post("/signup", data={"email": "maker@example.com", "password": "password123"})
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', r.text)
        assert csrf
        now = clock.now()
        with transaction(platform.sessions) as s:
            maker = accounts.sign_in(s, "maker@example.com", "password123")
            admin = customers.sign_up(
                s, "ops@x.example", "password123", now, platform.trial(), "admin"
            )
            caller = customers.sign_up(s, "buyer@x.example", "password123", now, platform.trial())
            ledger.top_up(s, caller.id, Money.parse("1"), now, "buyer-cash")
            app, _ = apps.publish(
                s, maker, MANIFEST, base64.b64decode(_package()), platform.app_code_dir, now, "CNY"
            )
            apps.submit(s, maker, "doc-search", now)
            apps.decide(s, admin, "doc-search", "approve", None, now)
            version = apps.live_of(s, app)
            new = app_earnings.NewCall(
                app.id, version.version, caller.id, maker.id, "k1", version.price_micros, 5
            )
            assert app_earnings.record_call(s, new, now)
            app_earnings.settle(s, now)
        page = dev.get("/apps/developer").text
        assert "doc-search" in page and _cell(page, "calls") == "1"
        assert (_cell(page, "gross"), _cell(page, "pending")) == ("0.020000", "0.014000")
        early = dev.post("/apps/developer/payout", data={"csrf": csrf.group(1)})
        assert early.status_code == 409 and "no earnings are available yet" in early.text
        clock.advance(7 * 24 * 3600)
        platform.reconcile()
        r = dev.post("/signin", data={"email": "maker@example.com", "password": "password123"})
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', r.text)  # a week on: a new session
        assert csrf
        done = dev.post("/apps/developer/payout", data={"csrf": csrf.group(1)})
        assert done.url.path == "/apps/developer"
        assert (_cell(done.text, "available"), _cell(done.text, "in-payout")) == (
            "0.000000",
            "0.014000",
        )
        forged = dev.post("/apps/developer/payout", data={"csrf": "nope"})
        assert forged.status_code == 403
        assert TestClient(create_app(platform)).get("/apps/developer").url.path == "/signin"
