"""`cardhour admin topup` against a real server; the client's idempotency keys and retries."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from cardhour.api.schemas import InstanceRead
from cardhour.cli.compute import launch as launch_cli
from cardhour.cli.main import app
from cardhour.client import ApiError, CardhourClient
from cardhour.client import connection as http
from tests.cli.test_cli import Server, admin_config, cli, ok, one_line_error


def _available(config: Path) -> Decimal:
    return Decimal(json.loads(ok(config, "balance", "--json"))["available_exact"])


def test_admin_topup(server: Server, tmp_path: Path) -> None:
    user = tmp_path / "user" / "config.json"
    email = f"u{uuid.uuid4().hex[:8]}@example.com"
    ok(user, "signup", "--url", server.url, "--email", email, "--password", "password123")
    admin = admin_config(server, tmp_path)
    before = _available(user)

    done = json.loads(ok(admin, "admin", "topup", email, "25.50", "--reference", "cli-1", "--json"))
    assert (done["email"], done["amount"], done["currency"]) == (email, "25.50", "CNY")
    assert (done["reference"], done["transfer_id"]) == ("cli-1", "topup:cli-1")
    again = json.loads(
        ok(admin, "admin", "topup", email, "25.50", "--reference", "cli-1", "--json")
    )
    assert again == done  # the same reference is credited once
    line = ok(admin, "admin", "topup", email, "1")
    assert line.startswith(f"credited 1.00 CNY to {email}\n  reference admin-")
    assert _available(user) == before + Decimal("26.50")

    assert "admin" in one_line_error(cli(user, "admin", "topup", email, "1"), "forbidden")
    one_line_error(cli(admin, "admin", "topup", email, "1.0000001"), "invalid_input")
    one_line_error(cli(admin, "admin", "topup", "nobody@example.com", "1"), "not_found")
    assert _available(user) == before + Decimal("26.50")


# -- the client, without a server -------------------------------------------------------------

NOW = datetime(2026, 1, 1, tzinfo=UTC)
INSTANCE = InstanceRead(
    id="i-1",
    name="demo",
    status="pending",
    status_reason=None,
    gpu="H100",
    count=1,
    image="pytorch",
    plan="on_demand",
    movable=False,
    data_centre=None,
    nodes=[],
    currency="CNY",
    price_per_card_hour="1.90",
    cost_so_far="0.000000",
    connection=None,
    created_at=NOW,
    updated_at=NOW,
)


def _client(handler: Any) -> CardhourClient:
    return CardhourClient("http://cardhour.test", "k", transport=httpx.MockTransport(handler))


def test_a_request_with_a_key_is_retried_with_the_same_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http, "RETRY_PAUSE_SECONDS", 0)
    keys: list[str | None] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers.get("Idempotency-Key"))
        if len(keys) < 3:  # the server may have acted: the reply was lost
            raise httpx.ReadTimeout("timed out", request=request)
        return httpx.Response(201, content=INSTANCE.model_dump_json())

    with _client(flaky) as client:
        assert client.create_instance(gpu="H100", idempotency_key="abc").id == "i-1"
    assert keys == ["abc", "abc", "abc"]

    keys.clear()
    with pytest.raises(ApiError) as caught, _client(flaky) as client:
        client.create_instance(gpu="H100")  # no key: never retried
    assert (caught.value.code, keys) == ("unreachable", [None])

    def down(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers.get("Idempotency-Key"))
        raise httpx.ConnectError("refused", request=request)

    keys.clear()
    with pytest.raises(ApiError) as caught, _client(down) as client:
        client.admin_top_up("a@b.c", "1", idempotency_key="t")
    assert caught.value.code == "unreachable" and keys == ["t"] * (1 + http.KEY_RETRIES)


def test_launch_sends_a_fresh_key_per_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    keys: list[str] = []

    def server(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers["Idempotency-Key"])
        return httpx.Response(201, content=INSTANCE.model_dump_json())

    monkeypatch.setattr(launch_cli, "connect", lambda *_args: _client(server))
    runner = CliRunner()
    for _ in range(2):
        r = runner.invoke(app, ["launch", "--gpu", "H100:1", "--no-wait", "--json"])
        assert r.exit_code == 0, r.output
    assert len(keys) == 2 and keys[0] != keys[1]
    assert all(uuid.UUID(k) for k in keys)
