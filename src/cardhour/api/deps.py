"""The request context: platform, `now`, API key, and the route's unit of work.

Routes open the transaction themselves (`with ctx.user_tx() as (session, user):`), so the commit
happens before the response is built: a client never sees success for something not committed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from cardhour.core.errors import Unauthorized
from cardhour.db.engine import transaction
from cardhour.db.models import UserRow
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts

bearer = HTTPBearer(auto_error=False, description="An API key from signup or login.")


@dataclass
class Ctx:
    platform: Platform
    now: datetime
    api_key: str | None
    address: str | None = None  # the client's (what a sign-in is throttled by, with the account)

    @contextmanager
    def tx(self) -> Iterator[Session]:
        with transaction(self.platform.sessions) as session:
            yield session

    @contextmanager
    def user_tx(self) -> Iterator[tuple[Session, UserRow]]:
        if not self.api_key:
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        with self.tx() as session:
            yield session, accounts.authenticate(session, self.api_key, self.now)


def get_platform(request: Request) -> Platform:
    platform: Platform = request.app.state.platform
    return platform


async def get_ctx(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None = Depends(bearer),
) -> Ctx:
    """`async` though it waits on nothing: FastAPI runs a plain function dependency in its
    threadpool, a thread hop per request for nothing."""
    platform = get_platform(request)
    key = credentials.credentials if credentials else None
    address = request.client.host if request.client else None
    return Ctx(platform, platform.clock.now(), key, address)
