"""Shared fixtures: every DB test runs on SQLite and on PostgreSQL.

PostgreSQL: `make test` starts a throwaway server and sets CARDHOUR_TEST_PG_URL (a maintenance
URL, e.g. postgresql://postgres@127.0.0.1:PORT/postgres); each test gets a fresh database,
copied from one migrated once per session (`SchemaTemplates`).
Without it the PostgreSQL half is skipped, loudly, and `make test` never runs that way.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from argon2 import PasswordHasher
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, text

from cardhour.api.app import create_app
from cardhour.core.clock import ManualClock
from cardhour.core.money import Money
from cardhour.db.engine import make_engine, transaction
from cardhour.db.migrate import upgrade
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import ledger
from cardhour.settings import Settings

PG_URL = os.environ.get("CARDHOUR_TEST_PG_URL")

# Marketplace replicas run as local processes in tests (no image build or container start per
# test): the gateway, scaling and billing do not depend on where a replica runs. The container
# launcher, the default, has its own tests (tests/backends/test_app_containers.py,
# tests/api/marketplace/test_app_containers.py), which ask for it explicitly.
os.environ.setdefault("CARDHOUR_MARKETPLACE__RUNTIME", "process")


def copy_sqlite(template: Path | str, dest: Path) -> str:
    """Copy a SQLite database with its backup API (consistent even in WAL mode); its URL."""
    src, dst = sqlite3.connect(template), sqlite3.connect(dest)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return f"sqlite:///{dest}"


def pg_admin() -> Engine:
    """An autocommit connection to the PostgreSQL server's maintenance database."""
    assert PG_URL
    return create_engine(
        PG_URL.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT"
    )


@dataclass
class SchemaTemplates:
    """Databases migrated once per test session (per xdist worker), copied for each test:
    SQLite by its backup API, PostgreSQL by `CREATE DATABASE … TEMPLATE` (30-50 ms measured
    here, where running the migrations took 0.15-0.26 s on SQLite and 0.39-0.59 s on PostgreSQL)."""

    root: Path
    sqlite: Path | None = None
    postgresql: str | None = None  # the template database's name

    def sqlite_copy(self, dest: Path) -> str:
        if self.sqlite is None:
            path = self.root / "template.sqlite"
            engine = make_engine(f"sqlite:///{path}")
            upgrade(engine)
            engine.dispose()
            self.sqlite = path
        return copy_sqlite(self.sqlite, dest)

    def postgresql_template(self, admin: Engine) -> str:
        if self.postgresql is None:
            name = f"tmpl_{uuid.uuid4().hex[:12]}"
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            assert PG_URL
            engine = make_engine(f"{PG_URL.rsplit('/', 1)[0]}/{name}")
            upgrade(engine)
            engine.dispose()  # a template must have no connections when it is copied
            self.postgresql = name
        return self.postgresql


@pytest.fixture(scope="session")
def schema_templates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchemaTemplates]:
    templates = SchemaTemplates(tmp_path_factory.mktemp("schema-templates"))
    yield templates
    if templates.postgresql is not None:
        admin = pg_admin()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{templates.postgresql}" WITH (FORCE)'))
        admin.dispose()


def _database(
    request: pytest.FixtureRequest, tmp_path: Path, templates: SchemaTemplates | None
) -> Iterator[str]:
    """A fresh database of the parametrised kind: empty, or a copy of the migrated template."""
    if request.param == "sqlite":
        path = tmp_path / "test.db"
        yield templates.sqlite_copy(path) if templates is not None else f"sqlite:///{path}"
        return
    if not PG_URL:
        if os.environ.get("CI"):  # CI runs `make test`, which always provides PostgreSQL
            pytest.fail("CARDHOUR_TEST_PG_URL not set under CI: run `make test`")
        pytest.skip("CARDHOUR_TEST_PG_URL not set (make test sets it)")
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = pg_admin()
    like = f' TEMPLATE "{templates.postgresql_template(admin)}"' if templates is not None else ""
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"{like}'))
    base = PG_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(
    request: pytest.FixtureRequest, tmp_path: Path, schema_templates: SchemaTemplates
) -> Iterator[str]:
    """A fresh database, already migrated to the newest revision."""
    yield from _database(request, tmp_path, schema_templates)


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database (for tests of the migrations themselves)."""
    yield from _database(request, tmp_path, None)


@pytest.fixture(autouse=True)
def cheap_passwords(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Argon2 at its cheapest: a sign-up or login costs ~1 ms instead of ~0.5 s (what is hashed
    and checked stays the same; tests marked `real_password_hashing` keep the real cost)."""
    if request.node.get_closest_marker("real_password_hashing") is None:
        cheap = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
        monkeypatch.setattr(accounts, "_hasher", cheap)


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """HOME in a temp dir for every test and the processes it starts: the CLI writes
    `~/.cardhour/ssh/*` and an `Include` line into `~/.ssh/config`, never the real ones."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    return home


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
