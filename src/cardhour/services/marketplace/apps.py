"""The app marketplace's catalogue: publishing versions, review, rollback, listing.

A developer publishes a package: a manifest (`core.apps`) and the code as a zip archive that
holds the entrypoint's module (`app:handle` → `app.py` or `app/__init__.py`). The first version
of a slug creates the app (in `draft`, owned by its publisher); later ones add versions, become
current and put the app back in `draft`. Review goes through `core.apps.review`: the developer
submits, an admin approves (the current version goes live), rejects (with a reason) or delists.
Callers only ever get the live (approved) version: a new upload serves nobody until it is
approved, and `rollback` returns to an earlier approved version at once.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy.orm import Session

from cardhour.core import apps
from cardhour.core.apps import AppManifest, AppStatus
from cardhour.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from cardhour.core.replicas import AppSpec, version_key
from cardhour.db.models import AppRow, AppVersionRow, UserRow
from cardhour.services.accounts import users as accounts
from cardhour.services.ids import new_id
from cardhour.services.marketplace.earnings import open_developer_accounts
from cardhour.store.marketplace import apps as store

MAX_CODE_BYTES = 20 * 1024 * 1024


MAX_UNPACKED_BYTES = 200 * 1024 * 1024
MAX_FILES = 10_000


def check_code(code: bytes, manifest: AppManifest) -> str:
    """The package's sha256; InvalidInput unless it is a zip (at most 20 MB, 200 MB and 10,000
    files unpacked) that holds the entrypoint's module and no path leaving the package."""
    if len(code) > MAX_CODE_BYTES:
        raise InvalidInput(f"the code archive is over {MAX_CODE_BYTES // (1024 * 1024)} MB")
    try:
        infos = zipfile.ZipFile(io.BytesIO(code)).infolist()
    except zipfile.BadZipFile:
        raise InvalidInput("the code must be a zip archive") from None
    if len(infos) > MAX_FILES or sum(i.file_size for i in infos) > MAX_UNPACKED_BYTES:
        raise InvalidInput(
            f"the package unpacks to more than {MAX_UNPACKED_BYTES // (1024 * 1024)} MB or "
            f"{MAX_FILES:,} files"
        )
    names = [i.filename for i in infos]
    for name in names:
        if name.startswith("/") or ".." in Path(name).parts:
            raise InvalidInput(f"the archive has a path outside the package: {name!r}")
    module = manifest.entrypoint.split(":")[0].replace(".", "/")
    if f"{module}.py" not in names and f"{module}/__init__.py" not in names:
        raise InvalidInput(
            f"entrypoint {manifest.entrypoint}: no {module}.py in the archive", field="entrypoint"
        )
    return hashlib.sha256(code).hexdigest()


def package_path(code_dir: Path, app_id: str, sha256: str) -> Path:
    """Where a version's code is stored: by content, so concurrent uploads never overwrite a
    version's bytes with another's."""
    return code_dir / app_id / f"{sha256}.zip"


def publish(
    session: Session,
    developer: UserRow,
    manifest_text: str,
    code: bytes,
    code_dir: Path,
    now: datetime,
    currency: str,
) -> tuple[AppRow, AppVersionRow]:
    """Add a version (the first creates the app); it becomes current and awaits review (the app
    is a draft again) while the approved version, if any, keeps serving callers. Forbidden when
    the slug belongs to another developer."""
    manifest = apps.parse_manifest(manifest_text)
    digest = check_code(code, manifest)
    app = store.get_app(session, manifest.slug)
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
        store.add_app(session, app)
        open_developer_accounts(session, developer.id, currency)
    version = AppVersionRow(
        app_id=app.id,
        version=store.last_version(session, app.id) + 1,
        manifest=manifest.model_dump_json(),
        price_micros=manifest.price_micros,
        code_sha256=digest,
        created_at=now,
    )
    path = package_path(code_dir, app.id, digest)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{new_id()}.tmp")
        tmp.write_bytes(code)
        tmp.replace(path)
    store.add_version(session, version)
    app.current_version, app.updated_at = version.version, now
    if app.status != AppStatus.DRAFT:  # the new version awaits review; the live one serves on
        app.status, app.status_reason = AppStatus.DRAFT.value, None
    session.flush()
    return app, version


def owned(session: Session, developer: UserRow, slug: str) -> AppRow:
    """The developer's app; another developer's app is indistinguishable from a missing one."""
    app = store.get_app(session, slug)
    if app is None or app.developer_id != developer.id:
        raise NotFound(f"no app {slug!r} of yours")
    return app


def owned_by(session: Session, developer_id: str) -> list[AppRow]:
    """The developer's apps, by slug (the API's `GET /apps/mine` and the console's dashboard)."""
    return store.list_apps_of(session, developer_id)


def listed(session: Session, slug: str) -> AppRow:
    """An app with a live (approved) version: what other accounts see and call."""
    app = store.get_app(session, slug)
    if app is None or app.live_version is None:
        raise NotFound(f"no app {slug!r} in the marketplace")
    return app


def version_of(session: Session, app: AppRow, version: int | None = None) -> AppVersionRow:
    """A version of the app; by default its current (latest) one."""
    wanted = app.current_version if version is None else version
    row = store.get_version(session, app.id, wanted)
    if row is None:
        raise NotFound(f"app {app.slug} has no version {wanted}")
    return row


def live_of(session: Session, app: AppRow) -> AppVersionRow:
    """The approved version callers get."""
    if app.live_version is None:
        raise NotFound(f"no app {app.slug!r} in the marketplace")
    return version_of(session, app, app.live_version)


@dataclass(frozen=True)
class AppView:
    """An app with one of its versions as it is shown: its manifest and its runtime key."""

    app: AppRow
    version: AppVersionRow
    manifest: AppManifest
    key: str  # `core.replicas.version_key`: where the runtime counts its replicas


def view(session: Session, app: AppRow, live: bool = False) -> AppView:
    """The app as its developer sees it (the current version), or as callers do (`live`: the
    approved version; NotFound when none is)."""
    version = live_of(session, app) if live else version_of(session, app)
    return AppView(app, version, manifest_of(version), version_key(app.id, version.version))


def manifest_of(version: AppVersionRow) -> AppManifest:
    return AppManifest.model_validate(json.loads(version.manifest))


def spec_of(code_dir: Path, app: AppRow, version: AppVersionRow) -> AppSpec:
    """What the runtime needs to run replicas of this version."""
    manifest = manifest_of(version)
    return AppSpec(
        version_key(app.id, version.version),
        package_path(code_dir, app.id, version.code_sha256),
        manifest.entrypoint,
        manifest.scaling,
        tuple(manifest.requirements),
        manifest.resources,
    )


def serving(session: Session, code_dir: Path) -> list[AppSpec]:
    """The versions callers are served: the live version of every listed app."""
    return [spec_of(code_dir, app, version) for app, version in store.list_serving(session)]


def rollback(
    session: Session, developer: UserRow, slug: str, version: int, now: datetime
) -> AppRow:
    """Serve an earlier approved version again (its manifest, price and code), at once."""
    app = owned(session, developer, slug)
    row = version_of(session, app, version)
    if row.approved_at is None:
        raise Conflict(f"version {version} of {slug} was never approved: submit it for review")
    app.current_version = app.live_version = version
    app.status, app.status_reason, app.updated_at = AppStatus.LISTED.value, None, now
    session.flush()
    return app


def submit(session: Session, developer: UserRow, slug: str, now: datetime) -> AppRow:
    """The developer asks for review (a draft, or again after a rejection or a delisting)."""
    app = owned(session, developer, slug)
    return _move(app, "submit", None, now)


def decide(
    session: Session, admin: UserRow, slug: str, action: str, reason: str | None, now: datetime
) -> AppRow:
    """The operator's `approve` (the version under review goes live), `reject` (a reason is
    required; an earlier approved version keeps serving) or `delist` (nothing serves)."""
    accounts.require_admin(admin)
    if action not in ("approve", "reject", "delist"):
        raise InvalidInput(f"unknown review action {action!r}; approve, reject or delist")
    if action == "reject" and not (reason or "").strip():
        raise InvalidInput("a rejection needs a reason for the developer", field="reason")
    app = store.get_app(session, slug)
    if app is None:
        raise NotFound(f"no app {slug!r}")
    _move(app, action, reason, now)
    if action == "approve":  # the reviewed version goes live
        version_of(session, app).approved_at = now
        app.live_version = app.current_version
    elif action == "delist":
        app.live_version = None
    session.flush()
    return app


def catalogue(session: Session, category: str | None = None) -> list[tuple[AppRow, AppManifest]]:
    """Apps with a live version, with its manifest, by category then slug."""
    found = [(app, manifest_of(live_of(session, app))) for app in store.list_live_apps(session)]
    if category is not None:
        found = [(a, m) for a, m in found if m.category == category]
    return sorted(found, key=lambda am: (am[1].category, am[0].slug))


def _move(app: AppRow, action: str, reason: str | None, now: datetime) -> AppRow:
    app.status = apps.review(app.status, action).value
    app.status_reason = reason if action in ("reject", "delist") else None
    app.updated_at = now
    return app
