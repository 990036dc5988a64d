"""Security headers on every answer (api/security_headers.py), and the SQLite database file
readable by its owner only."""

from __future__ import annotations

import stat
from pathlib import Path

from fastapi.testclient import TestClient

from cardhour.api.app import create_app
from cardhour.api.security_headers import API_CSP, CONSOLE_CSP, DOCS_CSP
from cardhour.core.clock import ManualClock
from cardhour.platform import Platform
from cardhour.settings import Settings
from tests.conftest import Api


def _common(headers: dict[str, str] | object) -> None:
    assert headers["x-content-type-options"] == "nosniff"  # type: ignore[index]
    assert headers["x-frame-options"] == "DENY"  # type: ignore[index]
    assert headers["referrer-policy"] == "same-origin"  # type: ignore[index]
    assert "strict-transport-security" not in headers  # type: ignore[operator]


def test_every_answer_carries_the_headers(api: Api) -> None:
    for path, csp in (
        ("/api/v1/health", API_CSP),
        ("/api/v1/nope", API_CSP),  # a 404
        ("/api/v1/instances", API_CSP),  # a 401
        ("/signin", CONSOLE_CSP),
        ("/gpus", CONSOLE_CSP),  # a redirect to /signin, followed
        ("/api/docs", DOCS_CSP),
    ):
        r = api.client.get(path)
        _common(r.headers)
        assert r.headers["content-security-policy"] == csp, path
    assert "frame-ancestors 'none'" in CONSOLE_CSP and "script-src 'self'" in CONSOLE_CSP
    https = TestClient(api.client.app, base_url="https://testserver")
    r = https.get("/api/v1/health")
    assert r.headers["strict-transport-security"] == "max-age=31536000"


def test_the_sqlite_file_is_the_owners_only(tmp_path: Path) -> None:
    platform = Platform(Settings(data_dir=tmp_path / "data"), clock=ManualClock())
    with TestClient(create_app(platform)) as client:
        assert client.get("/api/v1/health").status_code == 200
    for name in ("cardhour.db", "cardhour.db-wal"):
        path = tmp_path / "data" / name
        if path.exists():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, name
    assert (tmp_path / "data" / "cardhour.db").exists()
