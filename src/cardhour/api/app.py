"""The app factory: API under /api/v1, OpenAPI at /openapi.json, the console at /."""

from __future__ import annotations

from fastapi import FastAPI

from cardhour import __version__
from cardhour.api import errors
from cardhour.api.body_limits import BodyLimits
from cardhour.api.long_polls import LongPolls
from cardhour.api.routers import estimate, health
from cardhour.api.routers.accounts import admin as admin_accounts
from cardhour.api.routers.accounts import auth, ssh_keys
from cardhour.api.routers.billing import admin as admin_billing
from cardhour.api.routers.billing import payments, statements
from cardhour.api.routers.billing import wallet as billing
from cardhour.api.routers.compute import admin, instances, offers
from cardhour.api.routers.grants import admin as admin_proposals
from cardhour.api.routers.grants import hours as grants
from cardhour.api.routers.grants import proposals, reviews
from cardhour.api.routers.hosts import admin as admin_hosts
from cardhour.api.routers.hosts import agent
from cardhour.api.routers.marketplace import apps
from cardhour.api.routers.storage import volumes
from cardhour.api.security_headers import SecurityHeaders
from cardhour.console.app import mount_console
from cardhour.platform import Platform


def create_app(platform: Platform) -> FastAPI:
    app = FastAPI(
        title="cardhour",
        version=__version__,
        description="Self-hostable GPU cloud: live inventory, per-card-hour prices, instances.",
        openapi_url="/openapi.json",
        docs_url="/api/docs",
        redoc_url=None,
    )
    app.state.platform = platform
    errors.install(app)
    app.add_middleware(LongPolls)
    app.add_middleware(BodyLimits)  # before any route reads a body
    app.add_middleware(SecurityHeaders)  # outermost: on every answer, long polls' too
    apps.mount_gateway(app, "/api/v1")
    # agents first: every host's heartbeat is matched against the routes before it in order
    for module in (
        agent,
        auth,
        billing,
        offers,
        estimate,
        instances,
        admin,
        admin_billing,
        apps,
        admin_proposals,
        grants,
        proposals,
        reviews,
        payments,
        statements,
        ssh_keys,
        volumes,
        health,
        admin_hosts,
        admin_accounts,
    ):
        app.include_router(module.router, prefix="/api/v1")
    mount_console(app)
    return app
