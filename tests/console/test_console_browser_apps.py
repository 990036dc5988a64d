"""The marketplace in the console, in Debian Chromium: listed apps by category with their price
per call, and the try-it form calling the app through the gateway (charged like any call)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright import sync_api

from cardhour.core.money import Money
from cardhour.db.engine import transaction
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import customers, ledger
from cardhour.services.marketplace import apps
from cardhour.settings import Settings
from tests.api.marketplace.test_marketplace import MANIFEST, _package
from tests.console.browser import launch, live_server

pytestmark = pytest.mark.browser


@pytest.fixture
def live(database_url: str, tmp_path: Path) -> Iterator[tuple[Platform, str]]:
    settings = Settings(
        data_dir=tmp_path / "data", database_url=database_url, reconcilers={"interval_seconds": 0.2}
    )
    platform = Platform(settings)
    with live_server(platform) as url:
        yield platform, url


def test_try_an_app_from_the_marketplace_page(live: tuple[Platform, str]) -> None:
    platform, server = live
    now = platform.clock.now()
    with transaction(platform.sessions) as s:
        dev = customers.sign_up(s, "dev@apps.example", "password123", now, platform.trial())
        admin = customers.sign_up(
            s, "ops@apps.example", "password123", now, platform.trial(), "admin"
        )
        code = base64.b64decode(_package())
        apps.publish(s, dev, MANIFEST, code, platform.app_code_dir, now, "CNY")
        apps.submit(s, dev, "doc-search", now)
        apps.decide(s, admin, "doc-search", "approve", None, now)
    with sync_api.sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page()
        page.set_default_timeout(20_000)
        page.goto(f"{server}/signup")
        page.fill("#email", "user@apps.example")
        page.fill("#password", "password123")
        page.click("button[type=submit]")
        page.wait_for_url(f"{server}/gpus")
        with transaction(platform.sessions) as s:  # calls are paid in cash, not the trial
            user = accounts.sign_in(s, "user@apps.example", "password123")
            ledger.top_up(s, user.id, Money.parse("1"), platform.clock.now(), "console-cash")
        page.click("header nav >> text=Apps")
        page.wait_for_url(f"{server}/apps")
        sync_api.expect(page.locator("[data-testid=category-rag]")).to_have_text("rag")
        sync_api.expect(page.locator("[data-testid=price-doc-search]")).to_have_text("0.02")
        page.fill("#payload-doc-search", '{"query": "find the contract"}')
        page.click("[data-testid=try-doc-search]")
        sync_api.expect(page.locator("[data-testid=output-doc-search]")).to_contain_text(
            '"upper": "FIND THE CONTRACT"'
        )
        sync_api.expect(page.locator("[data-testid=charged-doc-search]")).to_contain_text(
            "0.02 CNY charged"
        )
        sync_api.expect(page.locator("[data-testid=balance]")).to_have_text("10.98", timeout=10_000)
        page.fill("#payload-doc-search", "[1, 2]")
        page.click("[data-testid=try-doc-search]")
        sync_api.expect(page.locator("[data-testid=error-doc-search]")).to_contain_text(
            "must be a JSON object"
        )
        browser.close()
