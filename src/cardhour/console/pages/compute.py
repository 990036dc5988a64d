"""The compute pages: the GPU cloud (cards and the launch form with its live quote), the list of
instances with stop/start/terminate, one instance's page (for a cluster, its cluster page), and
the htmx fragments that keep them live."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from cardhour.console.context import Page, open_page, signed_in
from cardhour.console.views import compute as views
from cardhour.core.errors import CardhourError
from cardhour.services.compute import instances
from cardhour.services.compute.instances import LaunchRequest
from cardhour.services.storage import starts

router = APIRouter(include_in_schema=False)


def _gpus_page(
    page: Page,
    status: int = 200,
    error: str | None = None,
    form: dict[str, Any] | None = None,
) -> Response:
    p = page.platform
    cards = views.inventory_cards(page.session, p, page.now)
    form = form or {"gpu": cards[0]["gpu"] if cards else "", "count": 1, "name": ""}
    try:
        quote = (
            views.quote_view(page.session, p, page.now, form["gpu"], form["count"]) if cards else {}
        )
    except CardhourError as exc:
        quote = {"quote_error": exc.message}
    return page.render(
        "gpus.html", status, cards=cards, images=p.catalog.images, form=form, error=error, **quote
    )


def _instances_page(
    page: Page, status: int = 200, error: str | None = None, choices: dict | None = None
) -> Response:
    """The instances page; `choices`: a start's choices to offer (`StartChoiceNeeded`)."""
    rows = views.instance_rows(page.session, page.user)
    return page.render("instances.html", status, rows=rows, error=error, choices=choices)


@router.get("/gpus", response_class=HTMLResponse)
def gpus(request: Request) -> Response:
    with signed_in(request) as page:
        return _gpus_page(page)


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
    with signed_in(request) as page:
        p = page.platform
        try:
            page.check_csrf(csrf)
            req = LaunchRequest(
                gpu=gpu,
                count=views.parse_count(count),
                name=name or None,
                image=image or None,
                ssh_key=ssh_key or None,
            )
            with page.attempt() as session:
                instances.create(session, p.catalog, page.user, req, page.now)
        except CardhourError as exc:
            form = {"gpu": gpu, "count": count, "name": name}
            return _gpus_page(page, exc.http_status, error=exc.message, form=form)
        page.wake()
    return RedirectResponse("/instances", status_code=303)


@router.get("/instances", response_class=HTMLResponse)
def instances_page(request: Request) -> Response:
    with signed_in(request) as page:
        return _instances_page(page)


@router.get("/instances/{ident}", response_class=HTMLResponse)
def instance_page(request: Request, ident: str) -> Response:
    """One instance; for a cluster, its cluster page (nodes, gate figures, environment)."""
    with signed_in(request) as page:
        try:
            ctx = views.instance_page(page.session, page.platform.catalog, page.user, ident)
        except CardhourError as exc:
            return _instances_page(page, exc.http_status, error=exc.message)
        return page.render("instance.html", **ctx)


@router.post("/instances/{ident}/{action}")
def instance_action(
    request: Request, ident: str, action: str, csrf: str = Form(""), mode: str = Form(starts.AUTO)
) -> Response:
    """Stop, start (`mode`: a start's choice, `services.storage.starts`) or terminate."""
    with signed_in(request) as page:
        catalog = page.platform.catalog
        verbs = {
            "stop": instances.stop,
            "start": lambda s, u, i, now: starts.start(s, catalog, u, i, now, mode),
            "terminate": instances.terminate,
        }
        try:
            page.check_csrf(csrf)
            if action not in verbs:
                raise CardhourError(f"unknown action {action!r}")
            with page.attempt() as session:
                verbs[action](session, page.user, ident, page.now)
        except starts.StartChoiceNeeded as exc:
            offer = {"ident": ident, **exc.details}
            return _instances_page(page, exc.http_status, error=exc.message, choices=offer)
        except CardhourError as exc:
            return _instances_page(page, exc.http_status, error=exc.message)
        page.wake()
    return RedirectResponse("/instances", status_code=303)


# htmx fragments ---------------------------------------------------------------------------


@router.get("/console/inventory", response_class=HTMLResponse)
def inventory_fragment(request: Request) -> Response:
    with open_page(request, anonymous=True) as page:
        cards = views.inventory_cards(page.session, page.platform, page.now)
        return page.fragment(
            "_inventory.html", {"cards": cards, "currency": page.platform.catalog.currency}
        )


@router.get("/console/quote", response_class=HTMLResponse)
def quote_fragment(request: Request, gpu: str = "", count: str = "1") -> Response:
    with open_page(request, anonymous=True) as page:
        try:
            ctx = views.quote_view(page.session, page.platform, page.now, gpu, count)
        except CardhourError as exc:
            ctx = {"quote_error": exc.message}
        return page.fragment("_quote.html", {**ctx, "currency": page.platform.catalog.currency})


@router.get("/console/instances", response_class=HTMLResponse)
def instances_fragment(request: Request) -> Response:
    with signed_in(request, fragment=True) as page:
        rows = views.instance_rows(page.session, page.user)
        return page.fragment("_instances.html", {"rows": rows, "csrf": page.csrf})


@router.get("/console/instances/{ident}", response_class=HTMLResponse)
def instance_fragment(request: Request, ident: str) -> Response:
    with signed_in(request, fragment=True) as page:
        try:
            ctx = views.instance_page(page.session, page.platform.catalog, page.user, ident)
        except CardhourError as exc:
            return Response(exc.message, status_code=exc.http_status, media_type="text/plain")
        return page.fragment("_instance.html", ctx)
