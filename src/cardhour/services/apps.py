"""The app marketplace's catalogue: publishing versions, review, rollback, listing.

A developer publishes a package: a manifest (`core.apps`) and the code as a zip archive that
holds the entrypoint's module (`app:handle` → `app.py` or `app/__init__.py`). The first version
of a slug creates the app (in `draft`, owned by its publisher); later ones add versions and become
current; `rollback` makes an earlier version current again. Review goes through
`core.apps.review`: the developer submits, an admin approves, rejects (with a reason) or delists.
Only listed apps are shown to, and callable by, other accounts.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from datetime import datetime
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from cardhour.core import apps
from cardhour.core.apps import AppManifest, AppStatus
from cardhour.core.errors import Forbidden, InvalidInput, NotFound
from cardhour.db.app_models import AppRow, AppVersionRow
from cardhour.db.models import UserRow
from cardhour.services import accounts
from cardhour.services.app_earnings import open_developer_accounts
from cardhour.services.ids import new_id

MAX_CODE_BYTES = 20 * 1024 * 1024


def check_code(code: bytes, manifest: AppManifest) -> str:
    """The package's sha256; InvalidInput unless it is a zip (at most 20 MB) that holds the
    entrypoint's module and no path leaving the package."""
    if len(code) > MAX_CODE_BYTES:
        raise InvalidInput(f"the code archive is over {MAX_CODE_BYTES // (1024 * 1024)} MB")
    try:
        names = zipfile.ZipFile(io.BytesIO(code)).namelist()
    except zipfile.BadZipFile:
        raise InvalidInput("the code must be a zip archive") from None
    for name in names:
        if name.startswith("/") or ".." in Path(name).parts:
            raise InvalidInput(f"the archive has a path outside the package: {name!r}")
    module = manifest.entrypoint.split(":")[0].replace(".", "/")
    if f"{module}.py" not in names and f"{module}/__init__.py" not in names:
        raise InvalidInput(
            f"entrypoint {manifest.entrypoint}: no {module}.py in the archive", field="entrypoint"
        )
    return hashlib.sha256(code).hexdigest()


def publish(
    session: Session,
    developer: UserRow,
    manifest_text: str,
    code: bytes,
    code_dir: Path,
    now: datetime,
    currency: str,
) -> tuple[AppRow, AppVersionRow]:
    """Add a version (the first creates the app); it becomes current. Forbidden when the slug
    belongs to another developer."""
    manifest = apps.parse_manifest(manifest_text)
    digest = check_code(code, manifest)
    app = session.scalars(select(AppRow).where(AppRow.slug == manifest.slug)).first()
    if app is not None and app.developer_id != developer.id:
        raise Forbidden(f"the slug {manifest.slug!r} belongs to another developer", field="slug")
    if app is None:
        app = AppRow(
            id=new_id(),
            slug=manifest.slug,
            developer_id=developer.id,
            status=AppStatus.DRAFT.value,
            current_version=0,
            created_at=now,
            updated_at=now,
        )
        session.add(app)
        open_developer_accounts(session, developer.id, currency)
    version = AppVersionRow(
        app_id=app.id,
        version=_next_version(session, app.id),
        manifest=manifest.model_dump_json(),
        price_micros=manifest.price_micros,
        code_sha256=digest,
        created_at=now,
    )
    folder = code_dir / app.id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{version.version}.zip").write_bytes(code)
    session.add(version)
    app.current_version, app.updated_at = version.version, now
    session.flush()
    return app, version


def _next_version(session: Session, app_id: str) -> int:
    found = session.scalars(
        select(AppVersionRow.version).where(AppVersionRow.app_id == app_id)
    ).all()
    return max(found, default=0) + 1


def owned(session: Session, developer: UserRow, slug: str) -> AppRow:
    """The developer's app; another developer's app is indistinguishable from a missing one."""
    app = session.scalars(select(AppRow).where(AppRow.slug == slug)).first()
    if app is None or app.developer_id != developer.id:
        raise NotFound(f"no app {slug!r} of yours")
    return app


def by_id(session: Session, app_id: str) -> AppRow:
    app = session.get(AppRow, app_id)
    if app is None:
        raise NotFound(f"no app {app_id!r}")
    return app


def listed(session: Session, slug: str) -> AppRow:
    """A listed app (what other accounts see and call); NotFound otherwise."""
    app = session.scalars(select(AppRow).where(AppRow.slug == slug)).first()
    if app is None or app.status != AppStatus.LISTED:
        raise NotFound(f"no app {slug!r} in the marketplace")
    return app


def version_of(session: Session, app: AppRow, version: int | None = None) -> AppVersionRow:
    wanted = app.current_version if version is None else version
    row = session.scalars(
        select(AppVersionRow).where(AppVersionRow.app_id == app.id, AppVersionRow.version == wanted)
    ).first()
    if row is None:
        raise NotFound(f"app {app.slug} has no version {wanted}")
    return row


def manifest_of(version: AppVersionRow) -> AppManifest:
    return AppManifest.model_validate(json.loads(version.manifest))


def rollback(
    session: Session, developer: UserRow, slug: str, version: int, now: datetime
) -> AppRow:
    """Make an earlier version current again (its manifest, price and code)."""
    app = owned(session, developer, slug)
    version_of(session, app, version)
    app.current_version, app.updated_at = version, now
    session.flush()
    return app


def submit(session: Session, developer: UserRow, slug: str, now: datetime) -> AppRow:
    """The developer asks for review (a draft, or again after a rejection or a delisting)."""
    app = owned(session, developer, slug)
    return _move(app, "submit", None, now)


def decide(
    session: Session, admin: UserRow, slug: str, action: str, reason: str | None, now: datetime
) -> AppRow:
    """The operator's `approve`, `reject` (a reason is required) or `delist`."""
    accounts.require_admin(admin)
    if action not in ("approve", "reject", "delist"):
        raise InvalidInput(f"unknown review action {action!r}; approve, reject or delist")
    if action == "reject" and not (reason or "").strip():
        raise InvalidInput("a rejection needs a reason for the developer", field="reason")
    app = session.scalars(select(AppRow).where(AppRow.slug == slug)).first()
    if app is None:
        raise NotFound(f"no app {slug!r}")
    return _move(app, action, reason, now)


def catalogue(session: Session, category: str | None = None) -> list[tuple[AppRow, AppManifest]]:
    """Listed apps with their current manifests, by category then slug."""
    rows = session.scalars(
        select(AppRow).where(AppRow.status == AppStatus.LISTED.value).order_by(AppRow.slug)
    ).all()
    found = [(app, manifest_of(version_of(session, app))) for app in rows]
    if category is not None:
        found = [(a, m) for a, m in found if m.category == category]
    return sorted(found, key=lambda am: (am[1].category, am[0].slug))


def _move(app: AppRow, action: str, reason: str | None, now: datetime) -> AppRow:
    app.status = apps.review(app.status, action).value
    app.status_reason = reason if action in ("reject", "delist") else None
    app.updated_at = now
    return app
