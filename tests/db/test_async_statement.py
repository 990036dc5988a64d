"""`AsyncStatement` (an idle host's heartbeat UPDATE run from the event loop on PostgreSQL): it
stores values as the ORM does and commits by itself, runs many at once on its few
connections, takes a connection the server dropped as lost and runs once more on a new one,
refuses missing parameters and a busy wait and raises driver errors (failing to connect too)
as `DirectStatement` does, and refuses SQLite."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, func, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import DataError, OperationalError
from sqlalchemy.exc import TimeoutError as SATimeoutError

from cardhour.db.async_statement import AsyncStatement
from cardhour.db.engine import make_statement_engine, normalise_url
from tests.db.test_direct_statement import T0, _row, calls, meta, with_default


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = make_statement_engine(database_url)
    if engine.dialect.name != "postgresql":
        engine.dispose()
        pytest.skip("PostgreSQL only: SQLite's statements run in a thread")
    meta.create_all(engine)
    yield engine
    engine.dispose()


def _insert(engine: Engine, connections: int = 4, wait: float = 30.0) -> AsyncStatement:
    stmt = pg_insert(calls).on_conflict_do_nothing(index_elements=["caller", "call_key"])
    return AsyncStatement(engine, stmt.returning(calls.c.id, calls.c.at), connections, wait)


def _count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(calls)) or 0)


def test_runs_from_the_loop_many_at_once_and_commit_by_themselves(engine: Engine) -> None:
    statement = _insert(engine, connections=3)

    async def scenario() -> None:
        found = await asyncio.gather(*(statement.row(_row(n)) for n in range(40)))
        assert sorted(row[0] for row in found if row) == sorted(f"id-{n}" for n in range(40))
        assert all(row is not None and row[1] == T0 for row in found)  # stored as the ORM does
        assert await statement.row(_row(99, key="k-1")) is None  # a conflict: nothing written
        assert len(statement._idle) <= 3  # never more connections than allowed

    asyncio.run(scenario())
    statement.close()
    assert _count(engine) == 40


def test_a_dropped_connection_is_run_again_on_a_new_one(engine: Engine) -> None:
    statement = _insert(engine, connections=2)

    async def scenario() -> None:
        await asyncio.gather(statement.row(_row(1)), statement.row(_row(2)))
        assert len(statement._idle) == 2
        killer = create_engine(
            normalise_url(engine.url.render_as_string(hide_password=False)),
            isolation_level="AUTOCOMMIT",
        )
        with killer.connect() as conn:
            killed = conn.scalar(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
        killer.dispose()
        assert killed and killed >= 2
        assert await statement.row(_row(3)) is not None  # the retry, on a new connection
        assert len(statement._idle) == 1  # the other dead one was closed with it

    asyncio.run(scenario())
    statement.close()
    engine.dispose()  # its pool's connections were terminated too
    assert _count(engine) == 3


def test_missing_parameters_a_busy_wait_and_sqlite_are_refused(engine: Engine) -> None:
    statement = _insert(engine, connections=1, wait=0.05)

    async def scenario() -> None:
        defaults = AsyncStatement(engine, with_default.insert())
        with pytest.raises(ValueError, match=r"parameters missing: \['tries'\]"):
            await defaults.row({"id": "x"})  # as DirectStatement: no default filled in
        assert await defaults.row({"id": "x", "tries": 0}) is None  # no RETURNING
        defaults.close()
        assert await statement.row(_row(1)) is not None
        assert statement._slots is not None
        async with statement._slots:  # its one connection is in use
            with pytest.raises(SATimeoutError):
                await statement.row(_row(2))
        assert await statement.row(_row(2)) is not None
        with pytest.raises(DataError):  # as SQLAlchemy raises it: the error layer maps it
            await statement.row({**_row(3), "id": "x" * 40})  # longer than the column
        assert await statement.row(_row(3)) is not None  # a new connection for the next

    asyncio.run(scenario())
    statement.close()
    nowhere = make_statement_engine("postgresql://postgres@127.0.0.1:1/none")
    unreachable = AsyncStatement(nowhere, calls.insert())
    with pytest.raises(OperationalError):  # the error layer's 503, not a 500
        asyncio.run(unreachable.row(_row(4)))
    nowhere.dispose()
    sqlite = make_statement_engine("sqlite://")
    with pytest.raises(ValueError, match="PostgreSQL only"):
        AsyncStatement(sqlite, select(1))
    sqlite.dispose()
