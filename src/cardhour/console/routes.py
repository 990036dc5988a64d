"""The web console: server-rendered pages (Jinja2) with htmx fragments, over the services."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from cardhour.console import billing, views
from cardhour.console import estimate as estimate_view
from cardhour.console.instance import instance_view
from cardhour.console.session import COOKIE, Viewer, check_csrf, viewer
from cardhour.core.errors import CardhourError
from cardhour.db.engine import transaction
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import customers, statements
from cardhour.services.compute import instances
from cardhour.services.compute.instances import LaunchRequest

_HERE = Path(str(resources.files("cardhour.console")))
templates = Jinja2Templates(directory=str(_HERE / "templates"))
templates.env.filters["cny"] = views.cny
router = APIRouter(include_in_schema=False)


def _platform(request: Request) -> Platform:
    platform: Platform = request.app.state.platform
    return platform


def _page(
    request: Request, name: str, who: Viewer | None, status: int = 200, **ctx: Any
) -> Response:
    platform = _platform(request)
    base: dict[str, Any] = {"user": who.user if who else None, "csrf": who.csrf if who else ""}
    if who:
        with transaction(platform.sessions) as session:
            base.update(views.balance_view(session, platform, who.user.id))
    base.setdefault("currency", platform.catalog.currency)
    return templates.TemplateResponse(request, name, {**base, **ctx}, status_code=status)


def _signin_redirect() -> Response:
    return RedirectResponse("/signin", status_code=303)


def _who(request: Request) -> Viewer | None:
    platform = _platform(request)
    with transaction(platform.sessions) as session:
        return viewer(request, session, platform)


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
    return RedirectResponse("/gpus" if _who(request) else "/signin", status_code=303)


def _auth_page(request: Request, signup: bool, status: int = 200, **ctx: Any) -> Response:
    p = _platform(request)
    heading, action = ("Sign up", "/signup") if signup else ("Sign in", "/signin")
    return _page(
        request,
        "auth.html",
        None,
        status,
        heading=heading,
        action=action,
        trial_credit=p.trial_credit.format(),
        **ctx,
    )


def _auth_post(request: Request, signup: bool, email: str, password: str) -> Response:
    """Sign up or sign in, then start a console session (an HttpOnly cookie)."""
    p = _platform(request)
    now = p.clock.now()
    try:
        with transaction(p.sessions) as session:
            if signup:
                user = customers.sign_up(session, email, password, now, p.trial())
            else:
                user = accounts.sign_in(session, email, password)
            key = accounts.create_key(session, user, now, "console", kind="session")
    except CardhourError as exc:
        return _auth_page(request, signup, exc.http_status, error=exc.message, email=email)
    return _session_cookie(key.secret, p.settings.secure_cookies)


@router.get("/signup", response_class=HTMLResponse)
def signup_page(request: Request) -> Response:
    return _auth_page(request, signup=True)


@router.post("/signup")
def signup(request: Request, email: str = Form(""), password: str = Form("")) -> Response:
    return _auth_post(request, True, email, password)


@router.get("/signin", response_class=HTMLResponse)
def signin_page(request: Request) -> Response:
    return _auth_page(request, signup=False)


@router.post("/signin")
def signin(request: Request, email: str = Form(""), password: str = Form("")) -> Response:
    return _auth_post(request, False, email, password)


@router.post("/signout")
def signout(request: Request, csrf: str = Form("")) -> Response:
    p = _platform(request)
    try:
        check_csrf(request, csrf)
    except CardhourError:
        return RedirectResponse("/", status_code=303)  # a forged sign-out does nothing
    with transaction(p.sessions) as session:
        accounts.revoke(session, request.cookies.get(COOKIE, ""), p.clock.now())
    p.gateway.forget_key(request.cookies.get(COOKIE, ""))  # try-it calls use it as a key
    response = RedirectResponse("/signin", status_code=303)
    response.delete_cookie(COOKIE)
    return response


def _gpus_page(
    request: Request,
    who: Viewer,
    status: int = 200,
    error: str | None = None,
    form: dict[str, Any] | None = None,
) -> Response:
    p = _platform(request)
    with transaction(p.sessions) as session:
        cards = views.inventory_cards(session, p)
        form = form or {"gpu": cards[0]["gpu"] if cards else "", "count": 1, "name": ""}
        try:
            quote = views.quote_view(session, p, form["gpu"], form["count"]) if cards else {}
        except CardhourError as exc:
            quote = {"quote_error": exc.message}
    return _page(
        request,
        "gpus.html",
        who,
        status,
        cards=cards,
        images=p.catalog.images,
        form=form,
        error=error,
        **quote,
    )


@router.get("/gpus", response_class=HTMLResponse)
def gpus(request: Request) -> Response:
    who = _who(request)
    return _gpus_page(request, who) if who else _signin_redirect()


@router.post("/instances")
def launch(
    request: Request,
    gpu: str = Form(""),
    count: str = Form("1"),
    name: str = Form(""),
    image: str = Form(""),
    ssh_key: str = Form(""),
    csrf: str = Form(""),
) -> Response:
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    try:
        check_csrf(request, csrf)
        req = LaunchRequest(
            gpu, views.parse_count(count), name or None, image or None, ssh_key or None
        )
        with transaction(p.sessions) as session:
            instances.create(session, p.catalog, p.policy, who.user, req, p.clock.now())
    except CardhourError as exc:
        form = {"gpu": gpu, "count": count, "name": name}
        return _gpus_page(request, who, exc.http_status, error=exc.message, form=form)
    p.wake()
    return RedirectResponse("/instances", status_code=303)


@router.get("/instances", response_class=HTMLResponse)
def instances_page(request: Request) -> Response:
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    with transaction(p.sessions) as session:
        rows = views.instance_rows(session, who.user)
    return _page(request, "instances.html", who, rows=rows)


@router.get("/instances/{ident}", response_class=HTMLResponse)
def instance_page(request: Request, ident: str) -> Response:
    """One instance; for a cluster, its cluster page (nodes, gate figures, environment)."""
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    try:
        with transaction(p.sessions) as session:
            ctx = instance_view(session, p.catalog, who.user, ident)
    except CardhourError as exc:
        with transaction(p.sessions) as session:
            rows = views.instance_rows(session, who.user)
        return _page(request, "instances.html", who, exc.http_status, rows=rows, error=exc.message)
    return _page(request, "instance.html", who, **ctx)


@router.post("/instances/{ident}/{action}")
def instance_action(request: Request, ident: str, action: str, csrf: str = Form("")) -> Response:
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    verbs = {"stop": instances.stop, "start": instances.start, "terminate": instances.terminate}
    try:
        check_csrf(request, csrf)
        if action not in verbs:
            raise CardhourError(f"unknown action {action!r}")
        with transaction(p.sessions) as session:
            verbs[action](session, who.user, ident, p.clock.now())
    except CardhourError as exc:
        with transaction(p.sessions) as session:
            rows = views.instance_rows(session, who.user)
        return _page(request, "instances.html", who, exc.http_status, rows=rows, error=exc.message)
    p.wake()
    return RedirectResponse("/instances", status_code=303)


@router.get("/estimate", response_class=HTMLResponse)
def estimate_page(request: Request) -> Response:
    """The estimator (public): the form, and results for the query string (shareable URLs)."""
    p = _platform(request)
    form = estimate_view.form_values(dict(request.query_params))
    ctx = estimate_view.result(p.catalog, form)
    status = 422 if "estimate_error" in ctx else 200
    choices = estimate_view.choices(p.catalog)
    return _page(request, "estimate.html", _who(request), status, form=form, **choices, **ctx)


# htmx fragments ---------------------------------------------------------------------------


@router.get("/console/inventory", response_class=HTMLResponse)
def inventory_fragment(request: Request) -> Response:
    p = _platform(request)
    with transaction(p.sessions) as session:
        cards = views.inventory_cards(session, p)
    return templates.TemplateResponse(
        request, "_inventory.html", {"cards": cards, "currency": p.catalog.currency}
    )


@router.get("/console/quote", response_class=HTMLResponse)
def quote_fragment(request: Request, gpu: str = "", count: str = "1") -> Response:
    p = _platform(request)
    try:
        with transaction(p.sessions) as session:
            ctx = views.quote_view(session, p, gpu, count)
    except CardhourError as exc:
        ctx = {"quote_error": exc.message}
    return templates.TemplateResponse(
        request, "_quote.html", {**ctx, "currency": p.catalog.currency}
    )


@router.get("/console/instances", response_class=HTMLResponse)
def instances_fragment(request: Request) -> Response:
    who = _who(request)
    if who is None:
        return Response(status_code=401)
    p = _platform(request)
    with transaction(p.sessions) as session:
        rows = views.instance_rows(session, who.user)
    return templates.TemplateResponse(request, "_instances.html", {"rows": rows, "csrf": who.csrf})


@router.get("/console/instances/{ident}", response_class=HTMLResponse)
def instance_fragment(request: Request, ident: str) -> Response:
    who = _who(request)
    if who is None:
        return Response(status_code=401)
    p = _platform(request)
    try:
        with transaction(p.sessions) as session:
            ctx = instance_view(session, p.catalog, who.user, ident)
    except CardhourError as exc:
        return Response(exc.message, status_code=exc.http_status, media_type="text/plain")
    return templates.TemplateResponse(request, "_instance.html", ctx)


@router.get("/console/balance", response_class=HTMLResponse)
def balance_fragment(request: Request) -> Response:
    who = _who(request)
    if who is None:
        return Response(status_code=401)
    p = _platform(request)
    with transaction(p.sessions) as session:
        ctx = views.balance_view(session, p, who.user.id)
    return templates.TemplateResponse(request, "_balance.html", ctx)


@router.get("/console/estimate", response_class=HTMLResponse)
def estimate_fragment(request: Request) -> Response:
    """The results for the form's current values; an error is shown in place (status 200)."""
    p = _platform(request)
    ctx = estimate_view.result(p.catalog, estimate_view.form_values(dict(request.query_params)))
    return templates.TemplateResponse(request, "_estimate.html", ctx)


# billing ----------------------------------------------------------------------------------


@router.get("/billing", response_class=HTMLResponse)
def billing_page(request: Request, month: str = "") -> Response:
    """The balance broken down and a month's statement (default: this month, so far)."""
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    now, currency = p.clock.now(), p.catalog.currency
    with transaction(p.sessions) as session:
        ctx = billing.statement_view(session, who.user, month, currency, now)
        ctx["bal"] = billing.balance_rows(session, who.user.id, currency, now)
    status = 422 if "statement_error" in ctx else 200
    return _page(request, "billing.html", who, status, **ctx)


@router.get("/console/statement", response_class=HTMLResponse)
def statement_fragment(request: Request, month: str = "") -> Response:
    """The statement of `month` for the month picker; an error is shown in place (status 200)."""
    who = _who(request)
    if who is None:
        return Response(status_code=401)
    p = _platform(request)
    with transaction(p.sessions) as session:
        ctx = billing.statement_view(session, who.user, month, p.catalog.currency, p.clock.now())
    return templates.TemplateResponse(
        request, "_statement.html", {**ctx, "currency": p.catalog.currency}
    )


@router.get("/billing/statement.csv")
def statement_csv(request: Request, month: str = "") -> Response:
    """The same CSV as `GET /api/v1/statements/{month}?format=csv`, for the signed-in user."""
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    now = p.clock.now()
    try:
        with transaction(p.sessions) as session:
            statements.read_one_snapshot(session)
            chosen = month.strip() or statements.month_of(now)
            st = statements.statement(session, who.user.id, chosen, now, p.catalog.currency)
    except CardhourError as exc:
        return Response(exc.message + "\n", status_code=exc.http_status, media_type="text/plain")
    return Response(
        statements.to_csv(st),
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="cardhour-statement-{st.month}.csv"'
        },
    )


@router.get("/console/low-balance", response_class=HTMLResponse)
def low_balance_fragment(request: Request) -> Response:
    """The low-balance banner (empty while the balance covers the running instances)."""
    who = _who(request)
    if who is None:
        return Response(status_code=401)
    p = _platform(request)
    with transaction(p.sessions) as session:
        ctx = views.balance_view(session, p, who.user.id)
    return templates.TemplateResponse(request, "_low_balance.html", ctx)


def mount_console(app: FastAPI) -> None:
    # imported here: the grants pages build on this module's helpers (`_page`, `_who`)
    from cardhour.console import apps, grants, grants_review

    app.mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static")
    app.include_router(router)
    app.include_router(grants.router)
    app.include_router(grants_review.router)
    app.include_router(apps.router)
