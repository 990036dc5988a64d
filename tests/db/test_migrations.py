"""The migrations produce exactly the schema the models declare, on both databases."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from cardhour.db.engine import make_engine
from cardhour.db.migrate import upgrade
from cardhour.db.models import Base


def test_migrations_match_models_and_rerun_cleanly(empty_database_url: str) -> None:
    engine = make_engine(empty_database_url)
    upgrade(engine)
    upgrade(engine)  # a second start is a no-op
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert diff == []
