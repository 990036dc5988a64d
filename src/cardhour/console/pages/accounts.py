"""Signing up, in and out of the console: a session token in an HttpOnly cookie (`session.py`).

The sign-in and sign-up pages show the signed-out frame even to someone signed in.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from cardhour.console.context import Page, open_page, platform_of
from cardhour.console.session import COOKIE
from cardhour.core.errors import CardhourError
from cardhour.services.accounts import throttle
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import customers

router = APIRouter(include_in_schema=False)


def _session_cookie(secret: str, secure: bool) -> Response:
    response = RedirectResponse("/gpus", status_code=303)
    response.set_cookie(
        COOKIE,
        secret,
        httponly=True,
        samesite="lax",
        secure=secure,
        max_age=int(accounts.SESSION_LIFETIME.total_seconds()),
    )
    return response


@router.get("/", response_class=HTMLResponse)
def home(request: Request) -> Response:
    with open_page(request) as page:
        return RedirectResponse("/gpus" if page.who else "/signin", status_code=303)


def _auth_page(page: Page, signup: bool, status: int = 200, **ctx: Any) -> Response:
    heading, action = ("Sign up", "/signup") if signup else ("Sign in", "/signin")
    return page.render(
        "auth.html",
        status,
        heading=heading,
        action=action,
        trial_credit=page.platform.trial_credit.format(),
        **ctx,
    )


def _auth_post(request: Request, signup: bool, email: str, password: str) -> Response:
    """Sign up or sign in under the throttle (`services.accounts.throttle`, its own
    transactions), then start a console session (an HttpOnly cookie)."""
    p = platform_of(request)
    now = p.clock.now()

    def act(session: Session) -> accounts.NewKey:
        if signup:
            user = customers.sign_up(session, email, password, now, p.trial())
        else:
            user = accounts.sign_in(session, email, password)
        return accounts.create_key(session, user, now, "console", kind="session")

    address = request.client.host if request.client else None
    try:
        key = throttle.attempt(p.sessions, now, email, address, act)
    except CardhourError as exc:
        with open_page(request, anonymous=True) as page:
            answer = _auth_page(page, signup, exc.http_status, error=exc.message, email=email)
        if "retry_after" in exc.details:
            answer.headers["Retry-After"] = str(exc.details["retry_after"])
        return answer
    # Secure when asked, or when this request came over HTTPS (the cookie never goes back in
    # clear text then)
    secure = p.settings.secure_cookies or request.url.scheme == "https"
    return _session_cookie(key.secret, secure)


@router.get("/signup", response_class=HTMLResponse)
def signup_page(request: Request) -> Response:
    with open_page(request, anonymous=True) as page:
        return _auth_page(page, signup=True)


@router.post("/signup")
def signup(request: Request, email: str = Form(""), password: str = Form("")) -> Response:
    return _auth_post(request, True, email, password)


@router.get("/signin", response_class=HTMLResponse)
def signin_page(request: Request) -> Response:
    with open_page(request, anonymous=True) as page:
        return _auth_page(page, signup=False)


@router.post("/signin")
def signin(request: Request, email: str = Form(""), password: str = Form("")) -> Response:
    return _auth_post(request, False, email, password)


@router.post("/signout")
def signout(request: Request, csrf: str = Form("")) -> Response:
    with open_page(request, anonymous=True) as page:
        try:
            page.check_csrf(csrf)
        except CardhourError:
            return RedirectResponse("/", status_code=303)  # a forged sign-out does nothing
        accounts.revoke(page.session, page.cookie, page.now)
    page.platform.gateway.forget_key(page.cookie)  # try-it calls use it as a key
    response = RedirectResponse("/signin", status_code=303)
    response.delete_cookie(COOKIE)
    return response
