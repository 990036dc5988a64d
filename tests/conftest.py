"""Shared fixtures: every DB test runs on SQLite and on PostgreSQL.

PostgreSQL: `make test` starts a throwaway server and sets CARDHOUR_TEST_PG_URL (a maintenance
URL, e.g. postgresql://postgres@127.0.0.1:PORT/postgres); each test gets a fresh database.
Without it the PostgreSQL half is skipped, loudly, and `make test` never runs that way.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from cardhour.api.app import create_app
from cardhour.core.clock import ManualClock
from cardhour.core.money import Money
from cardhour.db.engine import transaction
from cardhour.platform import Platform
from cardhour.services import accounts, ledger
from cardhour.settings import Settings

PG_URL = os.environ.get("CARDHOUR_TEST_PG_URL")


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'test.db'}"
        return
    if not PG_URL:
        if os.environ.get("CI"):  # CI runs `make test`, which always provides PostgreSQL
            pytest.fail("CARDHOUR_TEST_PG_URL not set under CI: run `make test`")
        pytest.skip("CARDHOUR_TEST_PG_URL not set (make test sets it)")
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(
        PG_URL.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    base = PG_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def platform(database_url: str, tmp_path: Path, clock: ManualClock) -> Iterator[Platform]:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        sim={"provision_seconds": 30},
        reconcilers={"autostop_margin_seconds": 10},
    )
    p = Platform(settings, clock=clock)
    yield p
    p.stop()


@pytest.fixture(scope="module")
def readonly_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """One SQLite-backed app per module, for pages and endpoints that never touch the data."""
    tmp = tmp_path_factory.mktemp("readonly")
    settings = Settings(data_dir=tmp, database_url=f"sqlite:///{tmp / 'db.sqlite'}")
    platform = Platform(settings, clock=ManualClock())
    with TestClient(create_app(platform)) as c:
        yield c
    platform.stop()


@dataclass
class Api:
    """A TestClient plus the helpers most tests need."""

    client: TestClient
    platform: Platform
    clock: ManualClock

    def signup(self, email: str | None = None, password: str = "password123") -> dict[str, str]:
        email = email or f"u{uuid.uuid4().hex[:8]}@example.com"
        r = self.client.post("/api/v1/auth/signup", json={"email": email, "password": password})
        assert r.status_code == 201, r.text
        return {"Authorization": f"Bearer {r.json()['api_key']}"}

    def top_up(self, headers: dict[str, str], amount: str) -> None:
        """Cash in (the admin top-up API belongs to the billing issue; this uses the service)."""
        now = self.clock.now()
        with transaction(self.platform.sessions) as s:
            user = accounts.authenticate(s, headers["Authorization"].removeprefix("Bearer "), now)
            ledger.top_up(s, user.id, Money.parse(amount), now, f"test-{uuid.uuid4().hex}")

    def settle(self, seconds: float = 0) -> None:
        """Advance the injected clock and let the reconcilers converge."""
        if seconds:
            self.clock.advance(seconds)
        self.platform.reconcile()


@pytest.fixture
def api(platform: Platform, clock: ManualClock) -> Iterator[Api]:
    with TestClient(create_app(platform)) as client:
        yield Api(client, platform, clock)
