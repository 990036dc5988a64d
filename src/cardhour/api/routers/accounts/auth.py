"""Sign-up and login (both return a new API key, shown once)."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from sqlalchemy.orm import Session

from cardhour.api import schemas
from cardhour.api.convert import compute as convert
from cardhour.api.deps import Ctx, get_ctx
from cardhour.services.accounts import throttle
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import customers

router = APIRouter(prefix="/auth", tags=["auth"])


@router.post("/signup", response_model=schemas.AuthRead, status_code=201)
def signup(body: schemas.SignupCreate, ctx: Ctx = Depends(get_ctx)) -> schemas.AuthRead:
    """Create an account; it receives the trial credit once. Refused sign-ups count toward
    the throttle of the email and the client address (429 `too_many_attempts`)."""

    def act(session: Session) -> schemas.AuthRead:
        user = customers.sign_up(session, body.email, body.password, ctx.now, ctx.platform.trial())
        key = accounts.create_key(session, user, ctx.now, "signup")
        return schemas.AuthRead(api_key=key.secret, user=convert.user(user))

    return throttle.attempt(ctx.platform.sessions, ctx.now, body.email, ctx.address, act)


@router.post("/login", response_model=schemas.AuthRead)
def login(body: schemas.LoginCreate, ctx: Ctx = Depends(get_ctx)) -> schemas.AuthRead:
    """Check email and password and issue a new API key. After too many failures for the
    account or the client address: 429 `too_many_attempts` with `Retry-After`."""

    def act(session: Session) -> schemas.AuthRead:
        user = accounts.sign_in(session, body.email, body.password)
        key = accounts.create_key(session, user, ctx.now, body.key_name)
        return schemas.AuthRead(api_key=key.secret, user=convert.user(user))

    return throttle.attempt(ctx.platform.sessions, ctx.now, body.email, ctx.address, act)


@router.get("/me", response_model=schemas.UserRead)
def me(ctx: Ctx = Depends(get_ctx)) -> schemas.UserRead:
    with ctx.user_tx() as (_session, user):
        return convert.user(user)
