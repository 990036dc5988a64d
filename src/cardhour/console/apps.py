"""The console's app marketplace: listed apps by category with their price per call, a try-it
form per app that calls it through the same gateway as the API (charged like any call), and the
developer's dashboard (their apps, calls, revenue, pending, available, paid; payouts)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from cardhour.backends.apps.runtime import Overloaded, Unavailable
from cardhour.console.routes import _page, _platform, _signin_redirect, _who, templates
from cardhour.console.session import COOKIE, check_csrf
from cardhour.core.errors import CardhourError
from cardhour.core.money import Money
from cardhour.db.engine import transaction
from cardhour.services.marketplace import apps
from cardhour.services.marketplace import earnings as app_earnings

router = APIRouter(include_in_schema=False)


def _cards(request: Request) -> list[dict[str, Any]]:
    p = _platform(request)
    with transaction(p.sessions) as session:
        found = apps.catalogue(session)
        return [
            {
                "slug": app.slug,
                "name": m.name,
                "category": m.category,
                "description": m.description,
                "price": Money(m.price_micros, p.catalog.currency).display(),
                "example": json.dumps(_example(m.input_schema)),
            }
            for app, m in found
        ]


def _example(schema: dict[str, Any]) -> dict[str, Any]:
    """A starting input for the try-it form from the app's input schema."""
    props = schema.get("properties")
    if not isinstance(props, dict):
        return {}
    kinds = {"string": "", "integer": 1, "number": 1.0, "boolean": False}
    return {k: kinds.get(str(v.get("type"))) for k, v in props.items() if isinstance(v, dict)}


@router.get("/apps", response_class=HTMLResponse)
def apps_page(request: Request) -> Response:
    who = _who(request)
    if who is None:
        return _signin_redirect()
    cards = _cards(request)
    categories = sorted({c["category"] for c in cards})
    return _page(request, "apps.html", who, cards=cards, categories=categories)


@router.post("/console/apps/{slug}/try", response_class=HTMLResponse)
def try_it(request: Request, slug: str, payload: str = Form(""), csrf: str = Form("")) -> Response:
    """Call the app with the form's JSON (charged like any call); the answer or the error is
    rendered in place."""
    who = _who(request)
    if who is None:
        return Response(status_code=401)
    p = _platform(request)
    ctx: dict[str, Any] = {"slug": slug}
    try:
        check_csrf(request, csrf)
        try:
            body = json.loads(payload or "{}")
        except ValueError as exc:
            raise CardhourError(f"the input is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise CardhourError("the input must be a JSON object")
        done = p.gateway.invoke(request.cookies.get(COOKIE, ""), slug, body, None)
        ctx |= {
            "output": json.dumps(done.output, indent=2, ensure_ascii=False),
            "price": done.price.display(),
            "currency": done.price.currency,
            "ms": done.duration_ms,
        }
    except (CardhourError, Overloaded, Unavailable) as exc:
        ctx["error"] = getattr(exc, "message", None) or str(exc)
    return templates.TemplateResponse(request, "_app_result.html", ctx)


@router.get("/apps/developer", response_class=HTMLResponse)
def developer_page(request: Request) -> Response:
    """The developer's dashboard: their apps with status and live version, calls, revenue,
    pending, available, in payout and paid; a button asks for a payout of what is available."""
    who = _who(request)
    if who is None:
        return _signin_redirect()
    return _page(request, "apps_developer.html", who, **_dashboard(request, who.user.id))


@router.post("/apps/developer/payout")
def developer_payout(request: Request, csrf: str = Form("")) -> Response:
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    try:
        check_csrf(request, csrf)
        with transaction(p.sessions) as session:
            app_earnings.request_payout(
                session, who.user.id, None, p.clock.now(), p.catalog.currency
            )
    except CardhourError as exc:
        ctx = _dashboard(request, who.user.id)
        return _page(request, "apps_developer.html", who, exc.http_status, error=exc.message, **ctx)
    return RedirectResponse("/apps/developer", status_code=303)


def _dashboard(request: Request, user_id: str) -> dict[str, Any]:
    p = _platform(request)
    cny = p.catalog.currency
    with transaction(p.sessions) as session:
        e = app_earnings.earnings(session, user_id)
        mine = apps.owned_by(session, user_id)
        payouts = app_earnings.payouts_of(session, user_id)
        rows = [
            {
                "slug": a.slug,
                "status": a.status,
                "reason": a.status_reason,
                "current": a.current_version,
                "live": a.live_version,
            }
            for a in mine
        ]
    money = {
        k: Money(getattr(e, k), cny).format(6)
        for k in ("gross", "developer_share", "pending", "available", "in_payout", "paid")
    }
    return {
        "apps": rows,
        "calls": e.calls,
        "refunded": e.refunded,
        "money": money,
        "payouts": [
            {
                "id": po.id,
                "amount": Money(po.amount_micros, po.currency).format(6),
                "status": po.status,
                "requested_at": po.requested_at.strftime("%Y-%m-%d %H:%M"),
            }
            for po in payouts
        ],
    }
