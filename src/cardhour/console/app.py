"""The web console: server-rendered pages (Jinja2) with htmx fragments, over the services.

`mount_console` puts it on the API's app at `/`: the static files, each capability's pages
(`pages/`), and the answer to a signed-out visitor (`context.SignInRequired`).
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from cardhour.console.context import SignInRequired, answer_sign_in_required
from cardhour.console.pages import (
    accounts,
    billing,
    compute,
    estimate,
    grants,
    marketplace,
    reviews,
)
from cardhour.console.templating import HERE

PAGES = (accounts, compute, estimate, billing, grants, reviews, marketplace)


def mount_console(app: FastAPI) -> None:
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
    app.add_exception_handler(SignInRequired, answer_sign_in_required)
    for pages in PAGES:
        app.include_router(pages.router)
