"""Run Alembic migrations programmatically (at `cardhour up` and in tests).

SQLite changes a column's type by rebuilding the table (`batch_alter_table`: copy, drop, rename).
Dropping a table other tables reference fails while foreign keys are enforced, and the pragma
that turns them off is ignored inside a transaction; so, as SQLite's own procedure for schema
changes says, the migrations run with foreign keys off, `PRAGMA foreign_key_check` must find
nothing before the commit, and they are on again afterwards.
"""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine

import cardhour.db.models  # noqa: F401  (every table on Base.metadata)


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", "cardhour.db:migrations")
    return config


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest revision; a no-op when it is already there. On SQLite,
    RuntimeError (and nothing committed) when the migrated data breaks a foreign key."""
    config = alembic_config()
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            _foreign_keys(connection, on=False)
        try:
            with connection.begin():
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
                if sqlite:
                    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                    if broken:
                        raise RuntimeError(f"migrations broke foreign keys: {broken[:5]}")
        finally:
            if sqlite:
                _foreign_keys(connection, on=True)


def _foreign_keys(connection: Connection, on: bool) -> None:
    """Outside any transaction (on the driver's connection: SQLAlchemy's would begin one)."""
    raw = connection.connection.driver_connection
    assert raw is not None
    raw.execute(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")
