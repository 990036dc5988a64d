"""The billing pages: the balance broken down and a month's statement (with its CSV), and the
header's balance and low-balance banner as htmx fragments.

Statements read one snapshot (`snapshot=True`), so their figures agree while metering commits.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from cardhour.console.context import signed_in
from cardhour.console.views import billing as views
from cardhour.core.errors import CardhourError
from cardhour.services.billing import statements

router = APIRouter(include_in_schema=False)


@router.get("/billing", response_class=HTMLResponse)
def billing_page(request: Request, month: str = "") -> Response:
    """The balance broken down and a month's statement (default: this month, so far)."""
    with signed_in(request, snapshot=True) as page:
        currency, user = page.platform.catalog.currency, page.user
        ctx = views.statement_view(page.session, user, month, currency, page.now)
        ctx["bal"] = views.balance_rows(page.session, user.id, currency, page.now)
        status = 422 if "statement_error" in ctx else 200
        return page.render("billing.html", status, **ctx)


@router.get("/console/statement", response_class=HTMLResponse)
def statement_fragment(request: Request, month: str = "") -> Response:
    """The statement of `month` for the month picker; an error is shown in place (status 200)."""
    with signed_in(request, fragment=True, snapshot=True) as page:
        currency = page.platform.catalog.currency
        ctx = views.statement_view(page.session, page.user, month, currency, page.now)
        return page.fragment("_statement.html", {**ctx, "currency": currency})


@router.get("/billing/statement.csv")
def statement_csv(request: Request, month: str = "") -> Response:
    """The same CSV as `GET /api/v1/statements/{month}?format=csv`, for the signed-in user."""
    with signed_in(request, snapshot=True) as page:
        chosen = month.strip() or statements.month_of(page.now)
        currency = page.platform.catalog.currency
        try:
            st = statements.statement(page.session, page.user.id, chosen, page.now, currency)
        except CardhourError as exc:
            text = exc.message + "\n"
            return Response(text, status_code=exc.http_status, media_type="text/plain")
    return Response(
        statements.to_csv(st),
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="cardhour-statement-{st.month}.csv"'
        },
    )


@router.get("/console/balance", response_class=HTMLResponse)
def balance_fragment(request: Request) -> Response:
    with signed_in(request, fragment=True) as page:
        ctx = views.balance_view(page.session, page.platform, page.user.id, page.now)
        return page.fragment("_balance.html", ctx)


@router.get("/console/low-balance", response_class=HTMLResponse)
def low_balance_fragment(request: Request) -> Response:
    """The low-balance banner (empty while the balance covers the running instances)."""
    with signed_in(request, fragment=True) as page:
        ctx = views.balance_view(page.session, page.platform, page.user.id, page.now)
        return page.fragment("_low_balance.html", ctx)
