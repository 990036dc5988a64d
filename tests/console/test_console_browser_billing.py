"""The billing page in Chromium: the usage line of a running instance, the CSV link, and the
low-balance banner appearing on its own (htmx polling) once the money runs short.

The server gives 1.00 of trial credit and warns when the money cannot cover two more hours, so
one RTX 4090 (0.60 an hour) is warned about as soon as it is metered, and the grace period is
long enough that it is not stopped during the test.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright import sync_api

from cardhour.platform import Platform
from cardhour.settings import Settings
from tests.console.browser import launch, live_server

pytestmark = pytest.mark.browser


@pytest.fixture
def short_money_server(database_url: str, tmp_path: Path) -> Iterator[str]:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        trial_credit="1.00",
        sim={"provision_seconds": 1},
        reconcilers={"interval_seconds": 0.2, "charge_interval_seconds": 1},
        billing={"low_balance_warning_seconds": 7200, "autostop_grace_seconds": 3600},
    )
    with live_server(Platform(settings)) as url:
        yield url


def test_billing_page_and_low_balance_banner_in_chromium(short_money_server: str) -> None:
    server = short_money_server
    with sync_api.sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page()
        page.set_default_timeout(15_000)
        page.goto(f"{server}/signup")
        page.fill("#email", "short@example.com")
        page.fill("#password", "password123")
        page.click("button[type=submit]")
        page.wait_for_url(f"{server}/gpus")
        sync_api.expect(page.locator("[data-testid=low-balance]")).to_have_count(0)

        page.select_option("#gpu", "RTX4090")
        page.fill("#count", "1")
        page.fill("#name", "tight")
        page.click("#launch")
        page.wait_for_url(f"{server}/instances")
        status = page.locator("[data-testid=status-tight]")
        sync_api.expect(status).to_have_text("running", timeout=20_000)
        # the banner arrives by polling, without a reload
        sync_api.expect(page.locator("[data-testid=low-balance]")).to_contain_text(
            "they stop soon unless you top up", timeout=20_000
        )

        page.click("header nav >> text=Billing")
        page.wait_for_url(f"{server}/billing")
        line = page.locator("[data-testid=usage-lines] tr[data-name=tight]")
        sync_api.expect(line).to_contain_text("1 × RTX4090")
        sync_api.expect(line).to_contain_text("running")
        sync_api.expect(line).to_contain_text("0.60")
        sync_api.expect(page.locator("[data-testid=download-csv]")).to_have_attribute(
            "href", f"/billing/statement.csv?month={time.strftime('%Y-%m', time.gmtime())}"
        )
        sync_api.expect(page.locator("[data-testid=low-balance]")).to_be_visible()
        browser.close()
