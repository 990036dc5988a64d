"""The cluster page in a real browser (Debian Chromium): a 2-node H100 cluster launched from the
console shows its topology, the readiness stages with the gate's figures, roles, hostnames and
the job environment; when a node is lost the page follows the replacement live."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright import sync_api

from cardhour.backends.sim.backend import SimBackend
from cardhour.core.money import Money
from cardhour.db.engine import transaction
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import ledger
from cardhour.settings import Settings
from tests.console.browser import launch, live_server

pytestmark = pytest.mark.browser


@pytest.fixture
def platform_live(database_url: str, tmp_path: Path) -> Iterator[tuple[Platform, str]]:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        sim={"provision_seconds": 1},
        reconcilers={"interval_seconds": 0.2},
    )
    platform = Platform(settings)
    with live_server(platform) as url:
        yield platform, url


def _top_up(platform: Platform, email: str, amount: str) -> None:
    now = platform.clock.now()
    with transaction(platform.sessions) as s:
        user = accounts.sign_in(s, email, "password123")
        ledger.top_up(s, user.id, Money.parse(amount), now, f"test-{email}")


def test_cluster_page_live_through_a_node_replacement(
    platform_live: tuple[Platform, str],
) -> None:
    platform, server = platform_live
    backend = platform.backend
    assert isinstance(backend, SimBackend)
    with sync_api.sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page()
        page.set_default_timeout(15_000)
        page.goto(f"{server}/signup")
        page.fill("#email", "cluster@example.com")
        page.fill("#password", "password123")
        page.click("button[type=submit]")
        page.wait_for_url(f"{server}/gpus")
        _top_up(platform, "cluster@example.com", "100")

        page.select_option("#gpu", "H100")
        page.fill("#count", "16")
        page.fill("#name", "duo")
        page.click("#launch")
        page.wait_for_url(f"{server}/instances")
        page.click("[data-testid=open-duo]")
        page.wait_for_url(f"{server}/instances/*")
        sync_api.expect(page.locator("[data-testid=status]")).to_have_text(
            "running", timeout=20_000
        )
        sync_api.expect(page.locator("[data-testid=topology]")).to_contain_text(
            "InfiniBand across them: 1 leaf switch"
        )
        sync_api.expect(page.locator("[data-testid=across]")).to_contain_text("(gate 120.0 GB/s)")
        stages = page.locator("[data-testid=stages] tbody tr")
        sync_api.expect(stages).to_have_count(6)
        sync_api.expect(stages.nth(4)).to_contain_text("nccl gate")
        sync_api.expect(stages.nth(4)).to_contain_text("ok")
        rows = page.locator("[data-testid=nodes] tbody tr")
        sync_api.expect(rows).to_have_count(2)
        sync_api.expect(rows.nth(0)).to_contain_text("head")
        sync_api.expect(rows.nth(1)).to_contain_text("duo-worker1")
        sync_api.expect(rows.nth(1)).to_contain_text("(gate 235.0)")
        env = page.locator("[data-testid=env]")
        sync_api.expect(env).to_contain_text("MASTER_ADDR=duo")
        sync_api.expect(env).to_contain_text("WORLD_SIZE=16")
        sync_api.expect(page.locator("[data-testid=hostfile]")).to_contain_text(
            "duo-worker1 slots=8"
        )
        sync_api.expect(page.locator("[data-testid=ssh]")).to_contain_text("ssh duo-worker1")

        worker = rows.nth(1).get_attribute("data-node")
        assert worker is not None
        backend.fault(worker, "down")  # lost: the page follows the replacement, live
        replaced = page.locator("[data-testid=stages] tbody tr").first
        sync_api.expect(replaced).to_contain_text(f"{worker} → ", timeout=20_000)
        sync_api.expect(page.locator("[data-testid=status]")).to_have_text(
            "running", timeout=20_000
        )
        sync_api.expect(
            page.locator(f"[data-testid=nodes] tr[data-node='{worker}']")
        ).to_have_count(0)
        sync_api.expect(page.locator("[data-testid=events]")).to_contain_text(
            f"node(s) lost: {worker}"
        )
        browser.close()
