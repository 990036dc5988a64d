"""Sign-up, sign-in, API keys and console sessions, roles."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.errors import Conflict, Forbidden, InvalidInput, Unauthorized
from cardhour.db.models import ApiKeyRow, UserRow
from cardhour.services.ids import hash_secret, new_id, new_secret
from cardhour.store.accounts import users as store

_hasher = PasswordHasher()
_EMAIL = re.compile(r"[^@\s\x00-\x1f\x7f]+@[^@\s\x00-\x1f\x7f]+\.[^@\s\x00-\x1f\x7f]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MIN_PASSWORD = 8
MAX_PASSWORD = 1024
SESSION_LIFETIME = timedelta(days=7)
ROLES = ("user", "reviewer", "admin")  # a reviewer scores the proposals assigned to them


_dummy: tuple[PasswordHasher, str] | None = None


def _dummy_hash() -> str:
    """A hash of no one's password, made by the hasher in use (so with its cost)."""
    global _dummy
    if _dummy is None or _dummy[0] is not _hasher:
        _dummy = (_hasher, _hasher.hash(new_secret("dummy")))
    return _dummy[1]


@dataclass(frozen=True)
class NewKey:
    """A freshly created secret: the only moment its plain text exists."""

    row: ApiKeyRow
    secret: str


def validate_credentials(email: str, password: str) -> str:
    email = (email or "").strip()
    if not _EMAIL.fullmatch(email) or len(email) > 320:
        raise InvalidInput(f"not a valid email address: {email!r}")
    if not MIN_PASSWORD <= len(password or "") <= MAX_PASSWORD:
        raise InvalidInput(f"password must be {MIN_PASSWORD} to {MAX_PASSWORD} characters")
    return email.lower()


def create_user(
    session: Session, email: str, password: str, now: datetime, role: str = "user"
) -> UserRow:
    """Create the user (email checked and unique, password hashed). Their wallet is billing's:
    `services.billing.customers.sign_up` calls this and opens it in the same transaction."""
    email = validate_credentials(email, password)
    if role not in ROLES:
        raise InvalidInput(f"unknown role {role!r}")
    if store.get_user_by_email(session, email):
        raise Conflict(f"an account for {email} already exists", field="email")
    user = UserRow(
        id=new_id(), email=email, password_hash=_hasher.hash(password), role=role, created_at=now
    )
    try:
        with session.begin_nested():
            store.add_user(session, user)
    except IntegrityError as exc:  # a concurrent sign-up with the same email won the race
        raise Conflict(f"an account for {email} already exists", field="email") from exc
    return user


def sign_in(session: Session, email: str, password: str) -> UserRow:
    email = (email or "").strip()
    if _CONTROL.search(email) or len(email) > 320 or len(password or "") > MAX_PASSWORD:
        raise Unauthorized("wrong email or password")
    user = store.get_user_by_email(session, email)
    try:
        if user is None:  # the same work as for a registered email: timing tells nothing
            _hasher.verify(_dummy_hash(), password or "")
            raise Unauthorized("wrong email or password")
        if not _hasher.verify(user.password_hash, password or ""):
            raise Unauthorized("wrong email or password")
    except (VerificationError, InvalidHashError) as exc:
        raise Unauthorized("wrong email or password") from exc
    return user


def create_key(
    session: Session, user: UserRow, now: datetime, name: str = "default", kind: str = "api"
) -> NewKey:
    if _CONTROL.search(name):
        raise InvalidInput("a key name cannot contain control characters")
    secret = new_secret("chs" if kind == "session" else "ch")
    expires = now + SESSION_LIFETIME if kind == "session" else None
    row = ApiKeyRow(
        id=new_id(),
        user_id=user.id,
        kind=kind,
        name=name[:100],
        key_hash=hash_secret(secret),
        created_at=now,
        expires_at=expires,
    )
    store.add_api_key(session, row)
    return NewKey(row, secret)


def authenticate(session: Session, secret: str, now: datetime) -> UserRow:
    """The user owning a live key or session; raises Unauthorized otherwise."""
    return authenticate_key(session, secret, now)[0]


def authenticate_key(session: Session, secret: str, now: datetime) -> tuple[UserRow, ApiKeyRow]:
    """`authenticate`, with the key's row (its expiry)."""
    found = store.get_api_key_with_user(session, hash_secret(secret or ""))
    row, user = found if found is not None else (None, None)
    if row is None or row.revoked_at is not None:
        raise Unauthorized("invalid or revoked API key")
    if row.expires_at is not None and as_utc(row.expires_at) <= now:
        raise Unauthorized("session expired: sign in again")
    if user is None:
        raise Unauthorized("invalid API key")
    return user, row


def find_by_email(session: Session, email: str) -> UserRow | None:
    return store.get_user_by_email(session, email)


def revoke(session: Session, secret: str, now: datetime) -> None:
    row = store.get_api_key_by_hash(session, hash_secret(secret or ""))
    if row is not None and row.revoked_at is None:
        row.revoked_at = now
        session.flush()


def get_user(session: Session, user_id: str) -> UserRow | None:
    return store.get_user(session, user_id)


def require_admin(user: UserRow) -> None:
    if user.role != "admin":
        raise Forbidden("this action needs the admin role")


def require_reviewer(user: UserRow) -> None:
    if user.role != "reviewer":
        raise Forbidden("this action needs the reviewer role")


def set_role(session: Session, admin: UserRow, email: str, role: str) -> UserRow:
    """Give the account `email` the role `role` (admins only). An admin cannot change their own
    role, so the last admin cannot lock everyone out by mistake."""
    require_admin(admin)
    role = (role or "").strip().lower()
    if role not in ROLES:
        raise InvalidInput(f"unknown role {role!r}; roles: {', '.join(ROLES)}", field="role")
    user = store.get_user_by_email(session, (email or "").strip())
    if user is None:
        raise InvalidInput(f"no account for {email!r}", field="email")
    if user.id == admin.id and role != user.role:
        raise Conflict("an admin cannot change their own role", field="email")
    user.role = role
    session.flush()
    return user
