"""Apps and their versions."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cardhour.core.apps import AppStatus
from cardhour.db.models import AppRow, AppVersionRow


def get_app(session: Session, slug: str) -> AppRow | None:
    return session.scalars(select(AppRow).where(AppRow.slug == slug)).first()


def app_exists(session: Session, slug: str) -> bool:
    return session.scalar(select(AppRow.id).where(AppRow.slug == slug)) is not None


def add_app(session: Session, row: AppRow) -> None:
    """Added to the session; the caller's flush inserts it."""
    session.add(row)


def list_apps_of(session: Session, developer_id: str) -> list[AppRow]:
    """The developer's apps, by slug."""
    stmt = select(AppRow).where(AppRow.developer_id == developer_id).order_by(AppRow.slug)
    return list(session.scalars(stmt))


def list_live_apps(session: Session) -> list[AppRow]:
    """Apps with a live (approved) version, by slug."""
    stmt = select(AppRow).where(AppRow.live_version.is_not(None)).order_by(AppRow.slug)
    return list(session.scalars(stmt))


def list_serving(session: Session) -> list[tuple[AppRow, AppVersionRow]]:
    """Every listed app with its live version, by slug."""
    rows = session.execute(
        select(AppRow, AppVersionRow)
        .join(
            AppVersionRow,
            (AppVersionRow.app_id == AppRow.id) & (AppVersionRow.version == AppRow.live_version),
        )
        .where(AppRow.status == AppStatus.LISTED.value)
        .order_by(AppRow.slug)
    )
    return [(app, version) for app, version in rows]


def get_version(session: Session, app_id: str, version: int) -> AppVersionRow | None:
    stmt = select(AppVersionRow).where(
        AppVersionRow.app_id == app_id, AppVersionRow.version == version
    )
    return session.scalars(stmt).first()


def last_version(session: Session, app_id: str) -> int:
    """The app's highest version number; 0 before its first."""
    stmt = select(func.max(AppVersionRow.version)).where(AppVersionRow.app_id == app_id)
    return int(session.scalar(stmt) or 0)


def add_version(session: Session, row: AppVersionRow) -> None:
    """Added to the session; the caller's flush inserts it."""
    session.add(row)
