"""Hypothesis profiles for the property tests, and a fresh database per example.

Profiles (env `HYPOTHESIS_PROFILE`; default `ci` when `CI` is set, else `dev`):

| profile | SQLite | PostgreSQL |
|---|---|---|
| `ci`  | 100 examples × 100 steps, topped up to ≥ 10,000 steps | 10 examples × 50 steps |
| `dev` | 10 examples × 40 steps | 3 examples × 25 steps |

They are applied to the state machines explicitly (`profile_settings`), never loaded
globally, so the other hypothesis tests of the suite keep their own settings.

Per-example databases come from a template migrated once per module: SQLite copies the file
(the backup API), PostgreSQL runs `CREATE DATABASE … TEMPLATE`. Both are far cheaper than
running the migrations for every example.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, settings
from sqlalchemy import Engine, text

from cardhour.core.clock import ManualClock
from cardhour.platform import Platform
from cardhour.settings import Settings, default_fleet_text
from tests.conftest import PG_URL, copy_sqlite, pg_admin

_BASE = settings(
    deadline=None,
    database=None,
    derandomize=False,  # hypothesis's own `ci` profile fixes the seed: explore anew each run
    print_blob=True,  # a failure prints the @reproduce_failure line that replays it
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)
settings.register_profile("ci", _BASE, max_examples=100, stateful_step_count=100)
settings.register_profile("ci-postgresql", _BASE, max_examples=10, stateful_step_count=50)
settings.register_profile("dev", _BASE, max_examples=10, stateful_step_count=40)
settings.register_profile("dev-postgresql", _BASE, max_examples=3, stateful_step_count=25)


def profile_name() -> str:
    return os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")


def profile_settings(database: str) -> settings:
    """The selected profile; on PostgreSQL its `-postgresql` variant when there is one."""
    name = profile_name()
    if database == "postgresql":
        try:
            return settings.get_profile(f"{name}-postgresql")
        except Exception:  # noqa: BLE001 - an unknown variant falls back to the profile itself
            pass
    return settings.get_profile(name)


def small_fleet(path: Path) -> Path:
    """Five nodes: H100 in bj1 (2 nodes, 1.90) and wh1 (1 node, 2.35), A800 in bj1 (1.20),
    RTX4090 in wh1 (0.60); 8 GPUs each, so launches contend for capacity and wait pending."""
    raw = yaml.safe_load(default_fleet_text())
    keep = {("bj1", "H100"): 2, ("bj1", "A800"): 1, ("wh1", "H100"): 1, ("wh1", "RTX4090"): 1}
    for dc in raw["data_centres"]:
        dc["node_groups"] = [
            group | {"count": keep[(dc["id"], group["gpu_model"])]}
            for group in dc["node_groups"]
            if (dc["id"], group["gpu_model"]) in keep
        ]
    raw["prices"] = [
        {"gpu_model": "H100", "data_centre": "bj1", "on_demand": "1.90"},
        {"gpu_model": "H100", "data_centre": "wh1", "on_demand": "2.35"},
        {"gpu_model": "A800", "on_demand": "1.20"},
        {"gpu_model": "RTX4090", "on_demand": "0.60"},
    ]
    path.write_text(yaml.safe_dump(raw))
    return path


@dataclass
class Databases:
    """Hands out a fresh, migrated database (with the fleet's nodes and prices) per example."""

    kind: str  # "sqlite" | "postgresql"
    fleet: Path
    template: str  # SQLite: a file path; PostgreSQL: a database name
    admin: Engine | None = None  # PostgreSQL maintenance connection

    def new(self, data_dir: Path) -> str:
        if self.kind == "sqlite":
            return copy_sqlite(self.template, data_dir / "db.sqlite")
        assert self.admin is not None and PG_URL
        name = f"p_{uuid.uuid4().hex[:12]}"
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"'))
        return f"{PG_URL.rsplit('/', 1)[0]}/{name}"

    def drop(self, url: str) -> None:
        if self.kind == "postgresql":
            assert self.admin is not None
            name = url.rsplit("/", 1)[1]
            with self.admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _migrate(url: str, data_dir: Path, fleet: Path) -> None:
    Platform(Settings(data_dir=data_dir, database_url=url, fleet_file=fleet), ManualClock()).stop()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def databases(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Databases]:
    tmp = tmp_path_factory.mktemp("billing-template")
    fleet = small_fleet(tmp / "fleet.yaml")
    if request.param == "sqlite":
        path = tmp / "template.sqlite"
        _migrate(f"sqlite:///{path}", tmp / "data", fleet)
        yield Databases("sqlite", fleet, str(path))
        return
    if not PG_URL:
        if os.environ.get("CI"):
            pytest.fail("CARDHOUR_TEST_PG_URL not set under CI: run `make test`")
        pytest.skip("CARDHOUR_TEST_PG_URL not set (make test sets it)")
    admin = pg_admin()
    name = f"tmpl_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        _migrate(f"{PG_URL.rsplit('/', 1)[0]}/{name}", tmp / "data", fleet)
        yield Databases("postgresql", fleet, name, admin)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
