"""The console's app marketplace: listed apps by category with their price per call, and a
try-it form per app that calls it through the same gateway as the API (charged like any call)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from cardhour.backends.apps.runtime import Overloaded, Unavailable
from cardhour.console.routes import _page, _platform, _signin_redirect, _who, templates
from cardhour.console.session import COOKIE, check_csrf
from cardhour.core.errors import CardhourError
from cardhour.core.money import Money
from cardhour.db.engine import transaction
from cardhour.services import app_calls, apps

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
        done = app_calls.invoke(
            p.sessions, p.clock, p.app_runtime, p.app_code_dir, p.catalog.currency,
            p.settings.marketplace.developer_share_bp, request.cookies.get(COOKIE, ""), slug,
            body, None,
        )  # fmt: skip
        ctx |= {
            "output": json.dumps(done.output, indent=2, ensure_ascii=False),
            "price": done.price.display(),
            "currency": done.price.currency,
            "ms": done.duration_ms,
        }
    except (CardhourError, Overloaded, Unavailable) as exc:
        ctx["error"] = getattr(exc, "message", None) or str(exc)
    return templates.TemplateResponse(request, "_app_result.html", ctx)
