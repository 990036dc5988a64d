"""`Idempotency-Key` for POST routes that create something or move money.

A route takes the dependency and runs its transaction through it; the action and the stored
response commit together, so a retry can never see one without the other::

    @router.post("/things", response_model=schemas.ThingRead, status_code=201,
                 responses=IDEMPOTENCY_RESPONSES)
    def create(
        body: schemas.ThingCreate,
        ctx: Ctx = Depends(get_ctx),
        idem: Idempotency = Depends(idempotency),
    ) -> Response:
        def action(session: Session, user: UserRow) -> schemas.ThingRead:
            return convert.thing(things.create(session, user, body, ctx.now))

        return idem.run_user(ctx, action, status_code=201)

`run_user` authenticates (`ctx.user_tx`) and scopes keys to the user; `run_anonymous` is for
routes without an API key (scope `""`). Without the header both simply run the action in one
transaction. The route returns the `Response` they build (the model's JSON; `response_model` on
the decorator keeps the OpenAPI schema) and does its after-commit work (`ctx.platform.wake()`)
afterwards; on a replay that work runs again, so it must be harmless to repeat.

What is replayed: the first successful response's status and body, byte for byte, with the
header `Idempotent-Replayed: true`. Errors are never stored (the transaction rolls back, the key
with it), so a retry after an error runs again. Rules: `cardhour.services.idempotency`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import Header, Request, Response
from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cardhour.api import schemas
from cardhour.api.deps import Ctx
from cardhour.db.models import UserRow
from cardhour.services import idempotency as rules
from cardhour.services.idempotency import Fingerprint, StoredResponse

KEY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"

#: For the route decorator's `responses=`: documents the 409 of a reused key.
IDEMPOTENCY_RESPONSES: dict[int | str, dict[str, Any]] = {
    409: {
        "model": schemas.ErrorRead,
        "description": "`idempotency_key_reused`: the key was used for a different request "
        "(or another conflict of the route).",
    }
}

# (session, scope, run the action) for one transaction
_Scope = Callable[[], AbstractContextManager[tuple[Session, str, Callable[[], BaseModel]]]]


@dataclass(frozen=True)
class Idempotency:
    """The request's `Idempotency-Key` (None when not sent) and its fingerprint."""

    key: str | None
    fingerprint: Fingerprint

    def run_user(
        self,
        ctx: Ctx,
        action: Callable[[Session, UserRow], BaseModel],
        status_code: int = 200,
    ) -> Response:
        """Run `action` in `ctx.user_tx()` at most once per (user, key); see the module doc.

        Raises what `action` raises (nothing stored then), `IdempotencyKeyReused` (409) for a
        key used with another method, path or body, and `Unauthorized` without an API key.
        """

        @contextmanager
        def scope() -> Iterator[tuple[Session, str, Callable[[], BaseModel]]]:
            with ctx.user_tx() as (session, user):
                yield session, user.id, lambda: action(session, user)

        return self._run(ctx.now, scope, status_code)

    def run_anonymous(
        self, ctx: Ctx, action: Callable[[Session], BaseModel], status_code: int = 200
    ) -> Response:
        """As `run_user` for a route without an API key: keys share the scope `""`."""

        @contextmanager
        def scope() -> Iterator[tuple[Session, str, Callable[[], BaseModel]]]:
            with ctx.tx() as session:
                yield session, "", lambda: action(session)

        return self._run(ctx.now, scope, status_code)

    def _run(self, now: datetime, scope: _Scope, status_code: int) -> Response:
        if self.key is None:
            with scope() as (_session, _user_id, act):
                body = act().model_dump_json()
            return _response(status_code, body)
        try:
            with scope() as (session, user_id, act):
                claimed = rules.claim(session, user_id, self.key, self.fingerprint, now)
                if isinstance(claimed, StoredResponse):
                    return _replayed(claimed)
                body = act().model_dump_json()
                rules.complete(session, claimed, status_code, body)
        except IntegrityError:
            # Usually a concurrent request with the same key committed first (our insert of the
            # key waited for it, then failed): everything here rolled back; send its response.
            with scope() as (session, user_id, _act):
                stored = rules.find(session, user_id, self.key, self.fingerprint, now)
            if stored is None:
                raise  # some other conflict: the error handler maps it to 409 `conflict`
            return _replayed(stored)
        return _response(status_code, body)


async def idempotency(
    request: Request,
    key: Annotated[
        str | None,
        Header(
            alias=KEY_HEADER,
            description="Any unique string (1-255 printable ASCII, e.g. a UUID). A retry with "
            "the same key and body gets the first response again instead of acting twice; "
            "the same key with another body is refused with 409. Kept for 24 hours.",
        ),
    ] = None,
) -> Idempotency:
    """The dependency: validates the header (422 `invalid_input`) and fingerprints the request."""
    if key is not None:
        rules.validate_key(key)
    path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    body = await request.body()  # cached by Starlette: the route still gets its body
    return Idempotency(key, rules.fingerprint(request.method, path, body))


def _response(status_code: int, body: str) -> Response:
    return Response(content=body, status_code=status_code, media_type="application/json")


def _replayed(stored: StoredResponse) -> Response:
    response = _response(stored.status_code, stored.body)
    response.headers[REPLAYED_HEADER] = "true"
    return response
