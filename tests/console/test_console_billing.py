"""The console's billing page without a browser: balance breakdown, a month's statement and its
CSV, the month picker, errors in the page, tenant isolation, and the low-balance banner."""

from __future__ import annotations

import csv
import io
import re
from decimal import Decimal

from fastapi.testclient import TestClient

from cardhour.api.app import create_app
from cardhour.core.clock import ManualClock
from cardhour.platform import Platform


def _signup(client: TestClient, email: str) -> str:
    r = client.post("/signup", data={"email": email, "password": "password123"})
    assert r.status_code == 200 and r.url.path == "/gpus", r.text
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', r.text)
    assert match
    return match.group(1)


def _launch(client: TestClient, csrf: str, name: str, count: int = 1) -> None:
    form = {"gpu": "H100", "count": str(count), "name": name, "csrf": csrf}
    r = client.post("/instances", data=form)
    assert r.status_code == 200 and r.url.path == "/instances", r.text


def test_billing_page_statement_csv_and_months(platform: Platform, clock: ManualClock) -> None:
    app = create_app(platform)
    with TestClient(app) as alice, TestClient(app) as bob:
        assert alice.get("/billing").url.path == "/signin"
        csrf = _signup(alice, "alice@example.com")
        _signup(bob, "bob@example.com")
        _launch(alice, csrf, "train")
        platform.reconcile()
        clock.advance(30)
        platform.reconcile()
        clock.advance(5400)  # 1.5 card-hours at 1.90
        platform.reconcile()

        page = alice.get("/billing")
        assert page.status_code == 200
        assert '<a href="/billing">Billing</a>' in page.text  # the nav link
        assert 'data-testid="statement-month">Statement 2026-01' in page.text
        assert 'data-name="train"' in page.text and ">1.5<" in page.text
        assert 'data-testid="amount-train">2.85<' in page.text
        assert 'data-testid="usage-total">2.85 CNY' in page.text
        assert 'data-testid="available">7.15<' in page.text  # 10.00 trial − 2.85
        assert "Trial credit" in page.text and "expires 2026-01-31 00:00 UTC" in page.text
        assert 'href="/billing/statement.csv?month=2026-01"' in page.text
        assert 'data-testid="low-balance"' not in page.text

        download = alice.get("/billing/statement.csv?month=2026-01")
        assert download.status_code == 200
        assert download.headers["content-type"].startswith("text/csv")
        assert "cardhour-statement-2026-01.csv" in download.headers["content-disposition"]
        rows = list(csv.DictReader(io.StringIO(download.text)))
        usage = [r for r in rows if r["type"] == "usage"]
        assert [(r["instance_name"], r["card_seconds"]) for r in usage] == [("train", "5400")]
        assert sum(Decimal(r["amount"]) for r in usage) == Decimal("2.85")

        theirs = bob.get("/billing")
        assert theirs.status_code == 200 and "train" not in theirs.text
        assert "No usage in this month" in theirs.text
        assert "train" not in bob.get("/billing/statement.csv?month=2026-01").text

        clock.advance(days=31)  # February: January is in the picker and complete
        platform.reconcile()
        again = alice.post(
            "/signin", data={"email": "alice@example.com", "password": "password123"}
        )  # the console session lasted a week
        assert again.url.path == "/gpus"
        feb = alice.get("/billing")
        assert "Statement 2026-02" in feb.text
        assert 'hx-get="/console/statement?month=2026-01"' in feb.text
        jan = alice.get("/console/statement?month=2026-01")
        assert jan.status_code == 200 and "Closing balance" in jan.text
        assert 'data-name="train"' in jan.text and "(so far" not in jan.text

        for bad, message in (("2026-13", "expected YYYY-MM"), ("2026-03", "has not started")):
            shown = alice.get(f"/billing?month={bad}")
            assert shown.status_code == 422 and message in shown.text
            assert message in alice.get(f"/console/statement?month={bad}").text
            assert alice.get(f"/billing/statement.csv?month={bad}").status_code == 422
        assert alice.get("/console/statement?month=2026-01").status_code == 200
        assert TestClient(app).get("/console/statement").status_code == 401


def test_the_low_balance_banner_is_on_every_page(platform: Platform, clock: ManualClock) -> None:
    app = create_app(platform)
    with TestClient(app) as alice, TestClient(app) as bob:
        csrf = _signup(alice, "alice@example.com")
        _signup(bob, "bob@example.com")
        _launch(alice, csrf, "big", count=4)  # 7.60 an hour on 10.00 of trial credit
        platform.reconcile()
        clock.advance(30)
        platform.reconcile()
        assert 'data-testid="low-balance"' not in alice.get("/instances").text
        clock.advance(4700)  # 9.92 used: the next minute (0.13) is not covered
        platform.reconcile()
        for path in ("/gpus", "/instances", "/billing", "/estimate"):
            shown = alice.get(path).text
            assert 'data-testid="low-balance"' in shown, path
            assert "they stop soon unless you top up" in shown
            assert 'data-testid="low-balance"' not in bob.get(path).text
        assert "they stop soon" in alice.get("/console/low-balance").text
        assert bob.get("/console/low-balance").text.strip() == ""
