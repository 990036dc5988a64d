"""The app marketplace's calls of `CardhourClient`: browse, publish and invoke apps, a
developer's earnings and payouts, and the operators' review decisions."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote

from cardhour.api.schemas.marketplace import (
    AppDecision,
    AppPublish,
    AppRead,
    AppRollback,
    EarningsRead,
    InvokeRead,
    PayoutCreate,
    PayoutRead,
)
from cardhour.client.connection import Connection, new_idempotency_key


class MarketplaceCalls(Connection):
    """/apps, /developer and /admin/apps: each method is one request (see `Connection` for
    errors and retries)."""

    def apps(self, category: str | None = None) -> list[AppRead]:
        params = {"category": category} if category else None
        return self._call(list[AppRead], "GET", "/apps", params=params)

    def my_apps(self) -> list[AppRead]:
        return self._call(list[AppRead], "GET", "/apps/mine")

    def app(self, slug: str) -> AppRead:
        return self._call(AppRead, "GET", _app_path(slug))

    def publish_app(self, manifest: str, code_zip: bytes) -> AppRead:
        """A new version of an app (the first creates it, in draft); `code_zip` as
        `core.apps.pack` makes it."""
        body = AppPublish(manifest=manifest, code_b64=base64.b64encode(code_zip).decode())
        return self._call(AppRead, "POST", "/apps", json=body.model_dump())

    def submit_app(self, slug: str) -> AppRead:
        return self._call(AppRead, "POST", _app_path(slug, "/submit"))

    def rollback_app(self, slug: str, version: int) -> AppRead:
        body = AppRollback(version=version).model_dump()
        return self._call(AppRead, "POST", _app_path(slug, "/rollback"), json=body)

    def invoke(self, slug: str, payload: dict[str, Any], call_id: str | None = None) -> InvokeRead:
        """One paid call; a `call_id` makes it idempotent (a repeat is refused with 409, never
        run or charged twice)."""
        headers = {"X-Call-Id": call_id} if call_id else None
        return self._call(
            InvokeRead, "POST", _app_path(slug, "/invoke"), json=payload, headers=headers
        )

    def earnings(self) -> EarningsRead:
        return self._call(EarningsRead, "GET", "/developer/earnings")

    def request_payout(
        self, amount: str | None = None, idempotency_key: str | None = None
    ) -> PayoutRead:
        """Retried with the same key (a new one when not given): asked for once."""
        body = PayoutCreate(amount=amount).model_dump()
        key = idempotency_key or new_idempotency_key()
        return self._call(PayoutRead, "POST", "/developer/payouts", key, json=body)

    def payouts(self) -> list[PayoutRead]:
        return self._call(list[PayoutRead], "GET", "/developer/payouts")

    def admin_decide_app(self, slug: str, action: str, reason: str | None = None) -> AppRead:
        """`approve`, `reject` (with a reason) or `delist`."""
        body = AppDecision(reason=reason).model_dump()
        path = f"/admin/apps/{quote(slug, safe='')}/{quote(action, safe='')}"
        return self._call(AppRead, "POST", path, json=body)


def _app_path(slug: str, suffix: str = "") -> str:
    return f"/apps/{quote(slug, safe='')}{suffix}"
