"""The console in a real browser: Debian Chromium driven by Playwright (no browser download).

sign-up → the GPU cloud page with live inventory → launch with a live quote → running → the
estimator, whose results follow the form.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright import sync_api

from cardhour.platform import Platform
from cardhour.settings import Settings
from tests.console.browser import launch, live_server

pytestmark = pytest.mark.browser


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[str]:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        sim={"provision_seconds": 1},
        reconcilers={"interval_seconds": 0.2},
    )
    with live_server(Platform(settings)) as url:
        yield url


def test_signup_launch_running_in_chromium(server: str) -> None:
    with sync_api.sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page()
        page.set_default_timeout(15_000)
        page.goto(f"{server}/signup")
        page.fill("#email", "browser@example.com")
        page.fill("#password", "password123")
        page.click("button[type=submit]")

        page.wait_for_url(f"{server}/gpus")
        assert page.inner_text("[data-testid=balance]") == "10.00"
        assert page.inner_text("[data-testid=free-H100]") == "192"
        assert "1.90" in page.inner_text(".card[data-gpu=H100]")

        page.fill("#count", "8")
        page.locator("#count").dispatch_event("change")
        rec = page.locator("[data-testid=recommendation]")
        sync_api.expect(rec).to_contain_text("NVLink")
        sync_api.expect(page.locator("#quote")).to_contain_text("15.20")

        page.fill("#count", "1")
        page.fill("#name", "web-h100")
        page.click("#launch")
        page.wait_for_url(f"{server}/instances")
        status = page.locator("[data-testid=status-web-h100]")
        sync_api.expect(status).to_have_text("running", timeout=20_000)
        stages = page.locator("[data-testid=stages-web-h100]")  # the readiness gate, live
        sync_api.expect(stages).to_contain_text("topology detected ✓")
        sync_api.expect(stages).to_contain_text("ready ✓")

        page.click("header nav >> text=Estimator")
        page.wait_for_url(f"{server}/estimate")
        sync_api.expect(page.locator("[data-testid=days]")).to_have_text("31.01 days")
        page.fill("#gpus", "1024")
        page.locator("#gpus").dispatch_event("change")  # htmx swaps the results in place
        sync_api.expect(page.locator("[data-testid=days]")).to_have_text("1.94 days")
        sync_api.expect(page.locator("[data-testid=estimate-chart] svg")).to_have_count(2)
        browser.close()
