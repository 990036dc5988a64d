"""The console's app marketplace: listed apps by category with their price per call, a try-it
form per app that calls it through the same gateway as the API (charged like any call), and the
developer's dashboard (their apps, calls, revenue, pending, available, paid; payouts)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from cardhour.console.context import (
    Page,
    platform_of,
    render_fragment,
    signed_in,
    signed_in_viewer,
)
from cardhour.console.session import COOKIE, check_csrf
from cardhour.core.errors import CardhourError
from cardhour.core.money import Money
from cardhour.services.marketplace import apps, calls
from cardhour.services.marketplace import earnings as app_earnings

router = APIRouter(include_in_schema=False)


def _cards(page: Page) -> list[dict[str, Any]]:
    currency = page.platform.catalog.currency
    return [
        {
            "slug": app.slug,
            "name": m.name,
            "category": m.category,
            "description": m.description,
            "price": Money(m.price_micros, currency).display(),
            "example": json.dumps(_example(m.input_schema)),
        }
        for app, m in apps.catalogue(page.session)
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
    with signed_in(request) as page:
        cards = _cards(page)
        categories = sorted({c["category"] for c in cards})
        return page.render("apps.html", cards=cards, categories=categories)


@router.post("/console/apps/{slug}/try", response_class=HTMLResponse)
def try_it(request: Request, slug: str, payload: str = Form(""), csrf: str = Form("")) -> Response:
    """Call the app with the form's JSON (charged like any call); the answer or the error is
    rendered in place. Who is signed in is read in a transaction of its own, closed before the
    call: the gateway opens its own and calls the app over the network."""
    signed_in_viewer(request, fragment=True)
    p = platform_of(request)
    ctx: dict[str, Any] = {"slug": slug}
    try:
        check_csrf(request, csrf)
        body = calls.parse_input((payload or "{}").encode())
        done = p.gateway.invoke(request.cookies.get(COOKIE, ""), slug, body, None)
        ctx |= {
            "output": json.dumps(done.output, indent=2, ensure_ascii=False),
            "price": done.price.display(),
            "currency": done.price.currency,
            "ms": done.duration_ms,
        }
    except CardhourError as exc:
        ctx["error"] = exc.message
    return render_fragment(request, "_app_result.html", ctx)


@router.get("/apps/developer", response_class=HTMLResponse)
def developer_page(request: Request) -> Response:
    """The developer's dashboard: their apps with status and live version, calls, revenue,
    pending, available, in payout and paid; a button asks for a payout of what is available."""
    with signed_in(request) as page:
        return page.render("apps_developer.html", **_dashboard(page))


@router.post("/apps/developer/payout")
def developer_payout(request: Request, csrf: str = Form("")) -> Response:
    with signed_in(request) as page:
        try:
            page.check_csrf(csrf)
            currency = page.platform.catalog.currency
            with page.attempt() as session:
                app_earnings.request_payout(session, page.user.id, None, page.now, currency)
        except CardhourError as exc:
            ctx = _dashboard(page)
            return page.render("apps_developer.html", exc.http_status, error=exc.message, **ctx)
    return RedirectResponse("/apps/developer", status_code=303)


def _dashboard(page: Page) -> dict[str, Any]:
    cny, user_id, session = page.platform.catalog.currency, page.user.id, page.session
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
