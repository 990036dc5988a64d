"""The console's request context: who is signed in, the one transaction of the request, and the
frame every full page shows (the signed-in user, the CSRF token, the balance and the
low-balance banner, the currency).

A route opens it itself, as API routes open `Ctx.user_tx()`:

    with signed_in(request) as page:
        return page.render("instances.html", rows=compute.instance_rows(page.session, page.user))

Every query of the request, the frame's included, runs in that one transaction, and the
response is built inside the block (templates render when the response is made), so the commit
happens before the client sees the page. A change that may be refused runs in `page.attempt()`,
a savepoint: a `CardhourError` undoes what it wrote and the route renders the refusal in the
same transaction. `page.wake()` wakes the reconcilers once the transaction has committed.

`signed_in` refuses a signed-out visitor before the route's body runs (`SignInRequired`: a
redirect to /signin for a page, a bare 401 for an htmx fragment; `app.py` answers it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fastapi import Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy.orm import Session

from cardhour.console.session import COOKIE, Viewer, check_csrf, viewer
from cardhour.console.templating import templates
from cardhour.console.views.billing import balance_view
from cardhour.db.engine import transaction
from cardhour.db.models import UserRow
from cardhour.db.snapshot import read_one_snapshot
from cardhour.platform import Platform


class SignInRequired(Exception):
    """A signed-out visitor asked for something that needs a session."""

    def __init__(self, fragment: bool) -> None:
        super().__init__("sign in first")
        self.fragment = fragment


def answer_sign_in_required(request: Request, exc: Exception) -> Response:
    """The app's handler for `SignInRequired`: 401 for a fragment, else the sign-in page."""
    if isinstance(exc, SignInRequired) and exc.fragment:
        return Response(status_code=401)
    return signin_redirect()


def signin_redirect() -> Response:
    return RedirectResponse("/signin", status_code=303)


def platform_of(request: Request) -> Platform:
    platform: Platform = request.app.state.platform
    return platform


@dataclass
class Page:
    """One console request inside its transaction."""

    request: Request
    platform: Platform
    session: Session
    now: datetime  # one per request, from the platform's clock
    who: Viewer | None
    woken: bool = False

    @property
    def user(self) -> UserRow:
        """The signed-in user (always set inside `signed_in`)."""
        if self.who is None:
            raise SignInRequired(fragment=False)
        return self.who.user

    @property
    def csrf(self) -> str:
        return self.who.csrf if self.who else ""

    @property
    def cookie(self) -> str:
        """The session secret (the try-it form calls apps with it as the API key)."""
        return self.request.cookies.get(COOKIE, "")

    def check_csrf(self, posted: str | None) -> None:
        """Forbidden unless `posted` is this session's CSRF token."""
        check_csrf(self.request, posted)

    @contextmanager
    def attempt(self) -> Iterator[Session]:
        """A savepoint around a change that may be refused: on any exception what it wrote is
        undone (the transaction stays usable for the page that shows the refusal), and every
        loaded row is expired, so the page reads what the rollback left, not what the refused
        change had loaded or written."""
        try:
            with self.session.begin_nested():
                yield self.session
        except BaseException:
            self.session.expire_all()
            raise

    def wake(self) -> None:
        """Wake the reconcilers after the commit (not at all if the request fails)."""
        self.woken = True

    def frame(self) -> dict[str, Any]:
        """What `base.html` needs: the user, the CSRF token, the balance, the currency."""
        who = self.who
        out: dict[str, Any] = {"user": who.user if who else None, "csrf": self.csrf}
        if who:
            out.update(balance_view(self.session, self.platform, who.user.id, self.now))
        out.setdefault("currency", self.platform.catalog.currency)
        return out

    def render(self, name: str, status: int = 200, **ctx: Any) -> Response:
        """A full page: the frame, with `ctx` on top."""
        return templates.TemplateResponse(
            self.request, name, {**self.frame(), **ctx}, status_code=status
        )

    def fragment(self, name: str, ctx: dict[str, Any], status: int = 200) -> Response:
        """An htmx fragment: the template with `ctx` only."""
        return render_fragment(self.request, name, ctx, status)


def render_fragment(
    request: Request, name: str, ctx: dict[str, Any], status: int = 200
) -> Response:
    """A fragment that needs no database (the estimator's results)."""
    return templates.TemplateResponse(request, name, ctx, status_code=status)


@contextmanager
def open_page(
    request: Request, *, anonymous: bool = False, snapshot: bool = False
) -> Iterator[Page]:
    """The request's transaction and who is signed in (None when nobody is, or when
    `anonymous`: the sign-in and sign-up pages show the signed-out frame). With `snapshot`,
    every query reads one snapshot (statements, whose figures must agree)."""
    platform = platform_of(request)
    now = platform.clock.now()
    with transaction(platform.sessions) as session:
        if snapshot:
            read_one_snapshot(session)  # before any query of the transaction
        who = None if anonymous else viewer(request, session, now)
        page = Page(request, platform, session, now, who)
        yield page
    if page.woken:
        platform.wake()


@contextmanager
def signed_in(
    request: Request, *, fragment: bool = False, snapshot: bool = False
) -> Iterator[Page]:
    """`open_page` for a signed-in user; `SignInRequired` (before the body runs) otherwise."""
    with open_page(request, snapshot=snapshot) as page:
        if page.who is None:
            raise SignInRequired(fragment)
        yield page


def signed_in_viewer(request: Request, *, fragment: bool = False) -> Viewer:
    """Only who is signed in, in a transaction of its own that is closed on return: for a
    route whose work must run outside any transaction (a call through the app gateway, which
    opens its own and waits on the network)."""
    with signed_in(request, fragment=fragment) as page:
        assert page.who is not None
        return page.who
