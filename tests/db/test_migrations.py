"""The migrations produce exactly the schema the models declare, on both databases."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from cardhour.core.hosts import inventory_key
from cardhour.db.engine import make_engine
from cardhour.db.migrate import alembic_config, upgrade
from cardhour.db.models import Base


def test_migrations_match_models_and_rerun_cleanly(empty_database_url: str) -> None:
    engine = make_engine(empty_database_url)
    upgrade(engine)
    upgrade(engine)  # a second start is a no-op
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert diff == []


def test_0020_keeps_instances_and_what_refers_to_them(empty_database_url: str) -> None:
    """0020 widens `instances.image`, which SQLite does by rebuilding the table: the rows and
    the rows that refer to them survive, and foreign keys are enforced again afterwards."""
    engine = make_engine(empty_database_url)
    config = alembic_config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0019")
    at = "2026-12-01 00:00:00"
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO users (id, email, password_hash, role, created_at) "
                "VALUES ('u1', 'a@example.com', 'x', 'user', :at)"
            ),
            {"at": at},
        )
        conn.execute(
            text(
                "INSERT INTO instances (id, owner_id, name, gpu_model, gpu_count, image, plan, "
                "movable, status, desired, price_micros, currency, attempt, usage_closed, "
                "billed_micros, billed_closed_micros, closed_frac, sla_seconds, bare_metal, "
                "created_at, updated_at) VALUES ('i1', 'u1', 'n', 'H100', 1, 'deepspeed', "
                "'on_demand', false, 'running', 'running', 1, 'CNY', 0, 0, 0, 0, 0, 900, false, "
                ":at, :at)"
            ),
            {"at": at},
        )
        conn.execute(
            text(
                "INSERT INTO instance_events (instance_id, at, to_status) VALUES ('i1', :at, 'x')"
            ),
            {"at": at},
        )
    upgrade(engine)
    long_ref = "registry.example.com/team/" + "a" * 200 + ":v1"
    with engine.begin() as conn:
        row = conn.execute(text("SELECT image, command, env, ports FROM instances")).one()
        assert tuple(row) == ("deepspeed", None, None, None)
        assert conn.execute(text("SELECT count(*) FROM instance_events")).scalar() == 1
        conn.execute(text("UPDATE instances SET image = :ref"), {"ref": long_ref})
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO instance_events (instance_id, at, to_status) VALUES ('no', :at, 'x')"
            ),
            {"at": at},
        )
    engine.dispose()


def test_0021_keys_the_inventories_it_finds(empty_database_url: str) -> None:
    """0021 gives every stored inventory the key `core.hosts.inventory_key` gives it (the host
    book reads an inventory again only when its key moves); a host without one gets none."""
    engine = make_engine(empty_database_url)
    config = alembic_config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0020")
    inventory = '{"gpus": []}'
    with engine.begin() as conn:
        for name, text_ in (("a", inventory), ("b", None)):
            conn.execute(
                text(
                    "INSERT INTO hosts (id, name, data_centre, inventory, standin, "
                    "desired_version, created_at) VALUES (:n, :n, 'bj1', :inv, false, 0, "
                    "'2026-12-01 00:00:00')"
                ),
                {"n": name, "inv": text_},
            )
    upgrade(engine)
    with engine.begin() as conn:
        rows = conn.execute(text("SELECT name, inventory_key FROM hosts"))
        keys = {name: key for name, key in rows}
    engine.dispose()
    assert keys == {"a": inventory_key(inventory), "b": None}
