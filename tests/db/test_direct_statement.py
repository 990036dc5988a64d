"""`DirectStatement` (the gateway's INSERT run straight on a DBAPI cursor): it stores values as
the ORM does, commits by itself, is idempotent through ON CONFLICT, runs from many threads,
reports a connection the server dropped (and drops the others), refuses missing parameters, and
gives up waiting for a connection as the pool does."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import (
    BigInteger,
    Column,
    Engine,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    create_engine,
    func,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as SATimeoutError

from cardhour.db.engine import DirectStatement, make_statement_engine, normalise_url
from cardhour.db.models import TS

meta = MetaData()
calls = Table(
    "direct_calls",
    meta,
    Column("id", String(32), primary_key=True),
    Column("caller", String(32)),
    Column("call_key", String(128)),
    Column("price_micros", BigInteger),
    Column("at", TS),
    UniqueConstraint("caller", "call_key"),
)
with_default = Table(
    "direct_defaults",
    meta,
    Column("id", String(32), primary_key=True),
    Column("tries", BigInteger, default=0),  # a Python-side default: not filled in by run
)
T0 = datetime(2026, 12, 3, 9, 30, 15, 123456, tzinfo=UTC)


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = make_statement_engine(database_url)
    meta.create_all(engine)
    yield engine
    engine.dispose()


def _insert(engine: Engine) -> DirectStatement:
    insert = sqlite_insert if engine.dialect.name == "sqlite" else pg_insert
    stmt = insert(calls).on_conflict_do_nothing(index_elements=["caller", "call_key"])
    return DirectStatement(engine, stmt.returning(calls.c.id))


def _row(n: int, key: str | None = None, at: datetime = T0) -> dict[str, object]:
    return {
        "id": f"id-{n}",
        "caller": "c",
        "call_key": key or f"k-{n}",
        "price_micros": n,
        "at": at,
    }


def test_it_stores_what_the_orm_stores_and_commits_by_itself(engine: Engine) -> None:
    direct = _insert(engine)
    assert direct.run(_row(1)) == "id-1"
    with engine.begin() as conn:  # the same row through SQLAlchemy, for comparison
        conn.execute(calls.insert().values(_row(2, at=T0 + timedelta(seconds=1))))
    direct.close()
    other = create_engine(normalise_url(engine.url.render_as_string(hide_password=False)))
    with other.connect() as conn:  # another connection sees it: committed
        got = conn.execute(select(calls.c.id, calls.c.at).order_by(calls.c.at)).all()
        assert [(i, at.replace(tzinfo=UTC) if at.tzinfo is None else at) for i, at in got] == [
            ("id-1", T0),
            ("id-2", T0 + timedelta(seconds=1)),
        ]
        # comparisons by time see both rows stored alike (SQLite compares text)
        before = conn.scalar(select(func.count()).where(calls.c.at < T0 + timedelta(seconds=1)))
        assert before == 1
    other.dispose()


def test_a_conflict_returns_nothing_and_writes_nothing(engine: Engine) -> None:
    direct = _insert(engine)
    assert direct.run(_row(1, key="same")) == "id-1"
    assert direct.run(_row(2, key="same")) is None
    with engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(calls)) == 1
    direct.close()


def test_concurrent_runs_each_land_once(engine: Engine) -> None:
    direct = _insert(engine)
    got: list[object] = []
    lock = threading.Lock()

    def work(first: int) -> None:
        for n in range(first, first + 25):
            result = direct.run(_row(n))
            with lock:
                got.append(result)

    threads = [threading.Thread(target=work, args=(i * 100,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == sorted(f"id-{i * 100 + n}" for i in range(8) for n in range(25))
    with engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(calls)) == 200
    direct.close()


def test_a_dropped_connection_is_reported_then_every_held_one_replaced(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL: SQLite has no server to drop connections")
    direct = _insert(engine)
    barrier = threading.Barrier(4)

    def hold(n: int) -> object:  # four runs at once: four connections held afterwards
        barrier.wait()
        return direct.run(_row(n))

    with ThreadPoolExecutor(4) as pool:
        assert sorted(map(str, pool.map(hold, range(4)))) == [f"id-{n}" for n in range(4)]
    killer = create_engine(
        normalise_url(engine.url.render_as_string(hide_password=False)),
        isolation_level="AUTOCOMMIT",
    )
    with killer.connect() as conn:
        conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        )
    killer.dispose()
    with pytest.raises(DBAPIError) as raised:
        direct.run(_row(10))
    assert raised.value.connection_invalidated
    assert direct.run(_row(10)) == "id-10"  # one retry is enough: the dead ones are gone
    with engine.connect() as conn:  # and the engine's pool was renewed too
        assert conn.scalar(select(func.count()).select_from(calls)) == 5
    direct.close()


def test_missing_parameters_and_a_busy_statement_are_refused_before_running(
    engine: Engine,
) -> None:
    direct = _insert(engine)
    defaults = DirectStatement(engine, with_default.insert())
    with pytest.raises(ValueError, match=r"parameters missing: \['tries'\]"):
        defaults.run({"id": "x"})
    assert defaults.run({"id": "x", "tries": 0}) is None  # no RETURNING: nothing to return
    defaults.close()
    busy = DirectStatement(engine, direct.statement, connections=1, wait=0.05)
    with busy._slots, pytest.raises(SATimeoutError):  # its one connection is in use
        busy.run(_row(2))
    assert busy.run(_row(2)) == "id-2"
    busy.close()
    direct.close()
