"""The console in a real browser: Debian Chromium driven by Playwright (no browser download).

sign-up → the GPU cloud page with live inventory → launch with a live quote → running → the
estimator, whose results follow the form.
"""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from playwright import sync_api

from cardhour.api.app import create_app
from cardhour.platform import Platform
from cardhour.settings import Settings

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[str]:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        sim={"provision_seconds": 1},
        reconcilers={"interval_seconds": 0.2},
    )
    platform = Platform(settings)
    platform.start()
    port = _free_port()
    config = uvicorn.Config(create_app(platform), host="127.0.0.1", port=port, log_level="warning")
    web = uvicorn.Server(config)
    thread = threading.Thread(target=web.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not web.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert web.started, "server did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        web.should_exit = True
        thread.join(timeout=10)
        platform.stop()


def test_signup_launch_running_in_chromium(server: str) -> None:
    assert Path(CHROMIUM).exists(), "Debian chromium missing: make test installs it"
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
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

        page.click("header nav >> text=Estimator")
        page.wait_for_url(f"{server}/estimate")
        sync_api.expect(page.locator("[data-testid=days]")).to_have_text("31.01 days")
        page.fill("#gpus", "1024")
        page.locator("#gpus").dispatch_event("change")  # htmx swaps the results in place
        sync_api.expect(page.locator("[data-testid=days]")).to_have_text("1.94 days")
        sync_api.expect(page.locator("[data-testid=estimate-chart] svg")).to_have_count(2)
        browser.close()
