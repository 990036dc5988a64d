"""The demo apps (examples/apps) listed in the marketplace by `cardhour up`: each folder with a
`cardhour-app.yaml` is published by a demo developer account (`DEMO_DEVELOPER`), submitted and
approved by the admin, once: a slug already in the marketplace is left as it is (the operator
may have delisted it). An app whose Python requirements this platform lacks is skipped, with
the reason (replicas use the platform's packages: the runtime's `missing`, passed in by the
composition root)."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from cardhour.core import apps as core_apps
from cardhour.db.engine import transaction
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import customers
from cardhour.services.marketplace import apps
from cardhour.store.marketplace import apps as store

DEMO_DEVELOPER = "demo-apps@cardhour.local"
MANIFEST = core_apps.MANIFEST_FILE


@dataclass(frozen=True)
class DemoApp:
    slug: str
    outcome: str  # "listed", "present" or "skipped: <why>"


def package(folder: Path) -> bytes:
    """The folder's code, zipped as an upload is (`core.apps.pack`)."""
    names = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()]
    return core_apps.pack({n: (folder / n).read_bytes() for n in core_apps.code_files(names)})


def install(
    sessions: sessionmaker[Session],
    folder: Path,
    code_dir: Path,
    admin_email: str,
    trial: customers.Trial,
    now: datetime,
    missing: Callable[[Collection[str]], list[str]],
) -> list[DemoApp]:
    """List every demo app of `folder` not in the marketplace yet (module docstring), one
    transaction each; `missing` says which of an app's requirements replicas would lack."""
    done: list[DemoApp] = []
    for app_dir in sorted(p for p in folder.iterdir() if (p / MANIFEST).is_file()):
        text = (app_dir / MANIFEST).read_text()
        manifest = core_apps.parse_manifest(text)
        with transaction(sessions) as session:
            if store.app_exists(session, manifest.slug):
                done.append(DemoApp(manifest.slug, "present"))
                continue
            if lacking := missing(tuple(manifest.requirements)):
                why = f"skipped: this platform lacks {', '.join(lacking)}"
                done.append(DemoApp(manifest.slug, why))
                continue
            admin = accounts.find_by_email(session, admin_email)
            if admin is None:
                raise RuntimeError(f"no admin {admin_email}: bootstrap the admin first")
            developer = accounts.find_by_email(session, DEMO_DEVELOPER) or customers.sign_up(
                session, DEMO_DEVELOPER, secrets.token_urlsafe(16), now, trial
            )
            currency = trial.amount.currency
            apps.publish(session, developer, text, package(app_dir), code_dir, now, currency)
            apps.submit(session, developer, manifest.slug, now)
            apps.decide(session, admin, manifest.slug, "approve", None, now)
            done.append(DemoApp(manifest.slug, "listed"))
    return done
