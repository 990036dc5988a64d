"""Users and their API keys / console sessions."""

from __future__ import annotations

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from cardhour.db.models import ApiKeyRow, UserRow


def get_user(session: Session, user_id: str) -> UserRow | None:
    return session.get(UserRow, user_id)


def get_user_by_email(session: Session, email: str) -> UserRow | None:
    return session.scalars(
        select(UserRow).where(func.lower(UserRow.email) == email.lower())
    ).first()


def add_user(session: Session, user: UserRow) -> UserRow:
    session.add(user)
    session.flush()
    return user


def add_api_key(session: Session, key: ApiKeyRow) -> ApiKeyRow:
    session.add(key)
    session.flush()
    return key


def get_api_key_by_hash(session: Session, key_hash: str) -> ApiKeyRow | None:
    return session.scalars(select(ApiKeyRow).where(ApiKeyRow.key_hash == key_hash)).first()


def get_api_key_with_user(
    session: Session, key_hash: str
) -> tuple[ApiKeyRow, UserRow | None] | None:
    """The key with that hash and its user (None where the user row is missing), in one query."""
    stmt = (
        select(ApiKeyRow, UserRow)
        .outerjoin(UserRow, UserRow.id == ApiKeyRow.user_id)
        .where(ApiKeyRow.key_hash == key_hash)
        .limit(1)
    )
    found = session.execute(stmt).first()
    return (found[0], found[1]) if found is not None else None


def low_balance_users(session: Session, user_ids: list[str]) -> dict[str, UserRow]:
    """Those of `user_ids` who are under a low-balance warning."""
    if not user_ids:
        return {}
    stmt = select(UserRow).where(UserRow.id.in_(user_ids), UserRow.low_balance_since.is_not(None))
    return {row.id: row for row in session.scalars(stmt)}


def get_users(session: Session, user_ids: list[str]) -> dict[str, UserRow]:
    if not user_ids:
        return {}
    return {row.id: row for row in session.scalars(select(UserRow).where(UserRow.id.in_(user_ids)))}


def clear_low_balance(session: Session, exclude: list[str]) -> None:
    """Lift the low-balance warning of every user not in `exclude` (nothing of theirs runs)."""
    stmt = update(UserRow).where(UserRow.low_balance_since.is_not(None))
    if exclude:
        stmt = stmt.where(UserRow.id.not_in(exclude))
    session.execute(
        stmt.values(low_balance_since=None).execution_options(synchronize_session=False)
    )
