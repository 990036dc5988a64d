"""Console pages without a browser: sessions, CSRF, errors shown in the page, tenant isolation."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from cardhour.api.app import create_app
from cardhour.platform import Platform


def _signup(client: TestClient, email: str) -> str:
    r = client.post("/signup", data={"email": email, "password": "password123"})
    assert r.status_code == 200 and r.url.path == "/gpus", r.text
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', r.text)
    assert match
    return match.group(1)


def test_console_flow_and_protections(platform: Platform) -> None:
    app = create_app(platform)
    with TestClient(app) as alice, TestClient(app) as bob:
        assert alice.get("/gpus").url.path == "/signin"
        bad = alice.post("/signin", data={"email": "x@y.z", "password": "wrongpass"})
        assert bad.status_code == 401 and "wrong email or password" in bad.text

        csrf = _signup(alice, "alice@example.com")
        forged = alice.post("/instances", data={"gpu": "H100", "count": "1", "csrf": "nope"})
        assert forged.status_code == 403 and "form expired" in forged.text

        big = alice.post("/instances", data={"gpu": "H100", "count": "8", "csrf": csrf})
        assert big.status_code == 402 and "does not cover one hour" in big.text

        ok = alice.post(
            "/instances", data={"gpu": "H100", "count": "1", "name": "mine", "csrf": csrf}
        )
        assert ok.url.path == "/instances" and 'data-name="mine"' in ok.text
        ident = re.search(r'action="/instances/([0-9a-f]+)/stop"', ok.text)
        assert ident

        bob_csrf = _signup(bob, "bob@example.com")
        assert 'data-name="mine"' not in bob.get("/instances").text
        stolen = bob.post(f"/instances/{ident.group(1)}/terminate", data={"csrf": bob_csrf})
        assert stolen.status_code == 404
        peek = bob.get(f"/instances/{ident.group(1)}")  # the instance page is the owner's only
        assert peek.status_code == 404 and "no instance" in peek.text
        assert bob.get(f"/console/instances/{ident.group(1)}").status_code == 404
        own = alice.get(f"/instances/{ident.group(1)}")
        assert own.status_code == 200 and "1 × H100" in own.text and "Readiness" in own.text

        for form in ({"gpu": "B200", "count": "1"}, {"gpu": "H100", "count": "abc"}):
            page = alice.post("/instances", data={**form, "csrf": csrf})
            assert page.status_code == 422 and 'class="error"' in page.text, page.text
        for count in ("-1", "0"):
            shown = alice.get("/console/quote", params={"gpu": "H100", "count": count}).text
            assert "between 1 and" in shown and "CNY/hour" not in shown
        forged_signout = alice.post("/signout", data={"csrf": "nope"})
        assert forged_signout.status_code == 200 and alice.get("/gpus").url.path == "/gpus"

        quote = alice.get("/console/quote", params={"gpu": "H100", "count": "16"})
        assert "2 whole nodes under one IB leaf" in quote.text
        assert (
            "enter a whole number"
            in alice.get("/console/quote", params={"gpu": "H100", "count": "x"}).text
        )
        assert alice.get("/console/instances").status_code == 200
        assert TestClient(app).get("/console/instances").status_code == 401
