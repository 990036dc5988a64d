"""`cardhour up` lists the demo apps of examples/apps once (both databases): published by the
demo developer, approved by the admin; a second start leaves them (and an operator's delisting)
alone; an app whose requirements the platform lacks is skipped with the reason."""

from __future__ import annotations

import shutil
from pathlib import Path

from cardhour.db.engine import transaction
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts
from cardhour.services.marketplace import apps
from cardhour.services.marketplace import demo as demo_apps

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "apps"


def test_the_demo_apps_are_listed_once(platform: Platform, tmp_path: Path) -> None:
    email, _ = platform.bootstrap_admin()
    first = platform.install_demo_apps()
    assert [(a.slug, a.outcome) for a in first] == [
        ("image-restore", "listed"),
        ("rag-search", "listed"),
        ("tts", "listed"),
    ]
    with transaction(platform.sessions) as s:
        assert [a.slug for a, _ in apps.catalogue(s, None)] == [
            "image-restore",
            "rag-search",
            "tts",
        ]
        admin = accounts.find_by_email(s, email)
        assert admin
        apps.decide(s, admin, "tts", "delist", "not tonight", platform.clock.now())
    again = platform.install_demo_apps()
    assert {a.outcome for a in again} == {"present"}
    with transaction(platform.sessions) as s:
        assert [a.slug for a, _ in apps.catalogue(s, None)] == ["image-restore", "rag-search"]
        developer = accounts.find_by_email(s, demo_apps.DEMO_DEVELOPER)
        assert developer is not None and developer.role == "user"

    odd = tmp_path / "demo"
    shutil.copytree(EXAMPLES / "tts", odd / "needs-more")
    manifest = odd / "needs-more" / demo_apps.MANIFEST
    text = manifest.read_text().replace("slug: tts", "slug: needs-more")
    manifest.write_text(
        text.replace(
            "entrypoint: app:handle", "entrypoint: app:handle\nrequirements: [no-such-package==9]"
        )
    )
    (skipped,) = demo_apps.install(
        platform.sessions, odd, platform.app_code_dir, email, platform.trial(),
        platform.clock.now(), platform.app_runtime.missing,
    )  # fmt: skip
    assert skipped == demo_apps.DemoApp(
        "needs-more", "skipped: this platform lacks no-such-package==9"
    )
