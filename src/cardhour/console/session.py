"""Console sign-in: a session token in an HttpOnly cookie (stored hashed, like API keys), and a
CSRF token derived from it that every form posts back."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime

from fastapi import Request
from sqlalchemy.orm import Session

from cardhour.core.errors import CardhourError, Forbidden
from cardhour.db.models import UserRow
from cardhour.services.accounts import users as accounts

COOKIE = "ch_session"


def csrf_token(session_secret: str) -> str:
    return hmac.new(session_secret.encode(), b"csrf", hashlib.sha256).hexdigest()[:32]


@dataclass(frozen=True)
class Viewer:
    user: UserRow
    csrf: str


def viewer(request: Request, session: Session, now: datetime) -> Viewer | None:
    """The signed-in user of this request, or None."""
    secret = request.cookies.get(COOKIE)
    if not secret:
        return None
    try:
        user = accounts.authenticate(session, secret, now)
    except CardhourError:
        return None
    return Viewer(user, csrf_token(secret))


def check_csrf(request: Request, posted: str | None) -> None:
    secret = request.cookies.get(COOKIE, "")
    if not secret or not posted or not hmac.compare_digest(csrf_token(secret), posted):
        raise Forbidden("the form expired: reload the page and try again")
