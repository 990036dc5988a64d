"""Request body limits (api/body_limits.py): 413 `too_large` before the route reads a body
over its limit (declared or sent in chunks), the routes that take files keep theirs, and a
stalled body is cut off with 408."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from cardhour.api import body_limits
from cardhour.platform import Platform
from tests.conftest import Api
from tests.console.browser import live_server

BIG = 2 * 1024 * 1024


def test_a_large_body_is_refused_before_it_is_read(api: Api) -> None:
    padded = json.dumps({"email": "a@b.cd", "password": "x" * BIG})
    r = api.client.post(
        "/api/v1/auth/login", content=padded, headers={"content-type": "application/json"}
    )
    assert r.status_code == 413, r.text
    assert r.json()["error"]["code"] == "too_large"
    assert r.json()["error"]["details"]["limit_bytes"] == body_limits.DEFAULT_LIMIT

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(4):
            yield b" " * (BIG // 4)
        yield b'{"email": "a@b.cd", "password": "x"}'

    r = api.client.post(
        "/api/v1/auth/signup", content=chunks(), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_large", r.text
    small = api.client.post(  # a small body in chunks still reaches its route
        "/api/v1/auth/login",
        content=iter([b'{"email": "a@b.cd", ', b'"password": "wrong-guess"}']),
        headers={"content-type": "application/json"},
    )
    assert small.status_code == 401, small.text


def test_routes_that_take_files_keep_their_own_limits() -> None:
    assert body_limits.limit_for("POST", "/api/v1/apps") > 27 * 1024 * 1024
    assert body_limits.limit_for("POST", "/api/v1/apps/echo/invoke") > 10 * 1024 * 1024
    assert body_limits.limit_for("PUT", "/api/v1/proposals/p1/document") > 5 * 1024 * 1024
    assert body_limits.limit_for("POST", "/api/v1/agent/report") == 16 * 1024 * 1024
    assert body_limits.limit_for("POST", "/api/v1/instances") == body_limits.DEFAULT_LIMIT
    assert body_limits.limit_for("GET", "/api/v1/apps") == body_limits.DEFAULT_LIMIT


def test_a_stalled_body_is_cut_off(platform: Platform, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real server and a raw socket: the headers and half a body, then nothing."""
    monkeypatch.setattr(body_limits, "STALL_SECONDS", 0.5)
    with live_server(platform) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            conn.sendall(
                b"POST /api/v1/auth/login HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                b'{"email": "a@b.cd", '
            )
            answer = conn.recv(65536).decode()
    assert answer.startswith("HTTP/1.1 408"), answer
    assert '"code":"body_timeout"' in answer
