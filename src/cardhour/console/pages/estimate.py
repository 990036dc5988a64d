"""The estimator (public): the form, the results for the query string (shareable URLs), and the
results fragment the form refreshes as it changes."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from cardhour.console.context import open_page, platform_of, render_fragment
from cardhour.console.views import estimate as views

router = APIRouter(include_in_schema=False)


@router.get("/estimate", response_class=HTMLResponse)
def estimate_page(request: Request) -> Response:
    """The form and the results for the query string; 422 when they cannot be estimated."""
    catalog = platform_of(request).catalog
    form = views.form_values(dict(request.query_params))
    ctx = views.result(catalog, form)  # pure: before the transaction, which stays short
    status = 422 if "estimate_error" in ctx else 200
    with open_page(request) as page:
        return page.render("estimate.html", status, form=form, **views.choices(catalog), **ctx)


@router.get("/console/estimate", response_class=HTMLResponse)
def estimate_fragment(request: Request) -> Response:
    """The results for the form's current values; an error is shown in place (status 200).
    No database: the estimate is pure."""
    catalog = platform_of(request).catalog
    ctx = views.result(catalog, views.form_values(dict(request.query_params)))
    return render_fragment(request, "_estimate.html", ctx)
