"""The console's request context: every page, fragment and form post runs in one transaction
(a refused change and the page that shows the refusal included), a signed-out visitor is sent to
sign in (a fragment answers 401)."""

from __future__ import annotations

import re
from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from cardhour.api.app import create_app
from cardhour.platform import Platform


class Counted:
    """`platform.sessions` that counts the sessions (one per transaction) it opens."""

    def __init__(self, factory: Callable[[], Session]) -> None:
        self.factory = factory
        self.opened = 0

    def __call__(self) -> Session:
        self.opened += 1
        return self.factory()


def test_one_transaction_per_request(platform: Platform) -> None:
    counted = Counted(platform.sessions)
    platform.sessions = counted  # type: ignore[assignment]
    with TestClient(create_app(platform), follow_redirects=False) as client:
        signed_up = client.post("/signup", data={"email": "a@example.com", "password": "pw123456"})
        assert signed_up.status_code == 303
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', client.get("/gpus").text)
        assert csrf
        form = {"gpu": "H100", "count": "1", "name": "one", "csrf": csrf.group(1)}
        assert client.post("/instances", data=form).status_code == 303
        listing = client.get("/instances").text
        ident = re.search(r'action="/instances/([0-9a-f]+)/stop"', listing)
        assert ident
        i = ident.group(1)

        def opened(method: str, path: str, status: int, **data: str) -> int:
            before = counted.opened
            r = client.request(method, path, data={"csrf": csrf.group(1), **data} if data else None)
            assert r.status_code == status, (path, r.status_code, r.text[:300])
            return counted.opened - before

        gets = {
            "/": 303,
            "/gpus": 200,
            "/instances": 200,
            f"/instances/{i}": 200,
            "/instances/nope": 404,  # the list, with the error, in the same transaction
            "/billing": 200,
            "/billing?month=2999-01": 422,
            "/billing/statement.csv": 200,
            "/console/statement": 200,
            "/console/balance": 200,
            "/console/low-balance": 200,
            "/console/instances": 200,
            f"/console/instances/{i}": 200,
            "/console/inventory": 200,
            "/console/quote?gpu=H100&count=1": 200,
            "/estimate": 200,
            "/apps": 200,
            "/apps/developer": 200,
            "/grants": 200,
            "/grants/new": 200,
            "/notifications": 200,
            "/reviews": 403,
            "/admin/grants": 403,
        }
        for path, status in gets.items():
            assert opened("GET", path, status) == 1, path
        assert opened("GET", "/console/estimate", 200) == 0  # pure: no database

        posts = [
            ("/instances", 422, {"gpu": "H100", "count": "abc"}),  # refused: the form again
            (f"/instances/{i}/reboot", 400, {"x": ""}),  # unknown action: the list
            (f"/instances/{i}/stop", 303, {"x": ""}),
            ("/apps/developer/payout", 409, {"x": ""}),  # nothing to pay out: the dashboard
            (f"/grants/{i}/submit", 404, {"x": ""}),
        ]
        for path, status, data in posts:
            assert opened("POST", path, status, **data) == 1, path

        anon = TestClient(create_app(platform), follow_redirects=False)
        assert anon.get("/instances").headers["location"] == "/signin"
        assert anon.get("/console/balance").status_code == 401
        assert anon.post("/console/apps/x/try", data={}).status_code == 401
