"""The sponsorship programme in Chromium, one walk through four signed-in browsers: the applicant
drafts a proposal (with its PDF) and submits it → the admin assigns two reviewers → both score it
→ the admin approves fewer hours than asked → the applicant sees the approved grant with its
hours, and the notification.

The accounts and the reviewer role are set up through the services before the server starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright import sync_api

from cardhour.db.engine import transaction
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import customers
from cardhour.settings import Settings
from tests.console.browser import launch, live_server

pytestmark = pytest.mark.browser
PDF = b"%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
PASSWORD = "password123"


@dataclass
class Site:
    url: str
    admin: tuple[str, str]  # email, password


@pytest.fixture
def site(database_url: str, tmp_path: Path) -> Iterator[Site]:
    settings = Settings(
        data_dir=tmp_path / "data", database_url=database_url, reconcilers={"interval_seconds": 1}
    )
    platform = Platform(settings)
    admin = platform.bootstrap_admin()
    now = platform.clock.now()
    with transaction(platform.sessions) as session:
        boss = accounts.sign_in(session, *admin)
        for email in ("ada@uni.edu", "rev1@uni.edu", "rev2@uni.edu"):
            customers.sign_up(session, email, PASSWORD, now, platform.trial())
        for email in ("rev1@uni.edu", "rev2@uni.edu"):
            accounts.set_role(session, boss, email, "reviewer")
    with live_server(platform) as url:
        yield Site(url, admin)


def test_proposal_to_grant_in_chromium(site: Site) -> None:
    url = site.url
    expect = sync_api.expect
    today = datetime.now(UTC).date()
    with sync_api.sync_playwright() as pw:
        browser = launch(pw)

        def signed_in(email: str, password: str = PASSWORD) -> sync_api.Page:
            page = browser.new_context().new_page()
            page.set_default_timeout(10_000)
            page.goto(f"{url}/signin")
            page.fill("#email", email)
            page.fill("#password", password)
            page.click("button[type=submit]")
            page.wait_for_url(f"{url}/gpus")
            return page

        ada = signed_in("ada@uni.edu")
        ada.click("header nav >> text=Grants")
        ada.wait_for_url(f"{url}/grants")
        ada.click("[data-testid=new-proposal]")
        ada.fill("#title", "Protein folding at scale")
        ada.fill("#institution", "University of Somewhere")
        ada.fill("#abstract", "We fold proteins.")
        ada.fill("#card_hours", "1000")
        ada.fill("#period_start", f"{today:%Y-%m-%d}")
        ada.fill("#period_end", f"{today + timedelta(days=90):%Y-%m-%d}")
        ada.check("#gpu-H100")
        ada.fill("#justification", "Each fold takes 8 H100s for a week.")
        ada.set_input_files(
            "#document", {"name": "p.pdf", "mimeType": "application/pdf", "buffer": PDF}
        )
        ada.click("#save")
        expect(ada.locator("[data-testid=proposal-state]")).to_have_text("draft")
        expect(ada.locator("[data-testid=document]")).to_be_visible()
        proposal = ada.url
        ada.click("#submit-proposal")
        expect(ada.locator("[data-testid=proposal-state]")).to_have_text("submitted")

        admin = signed_in(*site.admin)
        admin.goto(f"{url}/admin/proposals")
        admin.click("[data-testid=all-proposals] >> text=Protein folding at scale")
        admin.wait_for_url(proposal)
        admin.fill("#reviewers", "rev1@uni.edu, rev2@uni.edu")
        admin.click("#assign")
        expect(admin.locator("[data-testid=reviewers] li")).to_have_count(2)

        for email, merit in (("rev1@uni.edu", "5"), ("rev2@uni.edu", "4")):
            reviewer = signed_in(email)
            reviewer.goto(f"{url}/reviews")
            reviewer.click("[data-testid=assignments] >> text=Protein folding at scale")
            reviewer.select_option("#technical_merit", merit)
            reviewer.select_option("#feasibility", "4")
            reviewer.select_option("#compute_justification", "4")
            reviewer.fill("#comments", "sound plan")
            reviewer.click("#score")
            expect(reviewer.locator("[data-testid=my-scores]")).to_contain_text(
                f"Technical merit {merit}"
            )

        admin.reload()
        expect(admin.locator("[data-testid=reviews-count]")).to_have_text("2")
        expect(admin.locator("[data-testid=reviews] tbody tr")).to_have_count(2)
        admin.select_option("#decision", "approve")
        admin.fill("#grant_hours", "600")
        admin.click("#decide")
        expect(admin.locator("[data-testid=proposal-state]")).to_have_text("approved")

        ada.reload()
        expect(ada.locator("[data-testid=proposal-state]")).to_have_text("approved")
        expect(ada.locator("[data-testid=hours-granted]")).to_have_text("600 on H100")
        expect(ada.locator("[data-testid=granted]")).to_have_text("600.000")
        expect(ada.locator("[data-testid=remaining]")).to_have_text("600.000")
        ada.click(".subnav >> text=Notifications")
        latest = ada.locator("[data-testid=notification]").first
        expect(latest).to_contain_text("was approved")
        expect(latest).to_contain_text("Granted 600 card-hours on H100 (requested 1,000)")
        browser.close()
