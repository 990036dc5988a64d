"""Run Alembic migrations programmatically (at `cardhour up` and in tests)."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

import cardhour.db.models  # noqa: F401  (every table on Base.metadata)


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", "cardhour.db:migrations")
    return config


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest revision; a no-op when it is already there."""
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
