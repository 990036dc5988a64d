"""Engine and unit of work. Dialect differences live here and in `locking.py`, nowhere else.

SQLite: one process; every transaction starts with `BEGIN IMMEDIATE`, so transactions that write
are serialised and no check-then-act race exists. PostgreSQL: READ COMMITTED plus row locks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Engine, Executable, create_engine, event
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler


def normalise_url(url: str) -> str:
    """`postgresql://` → the psycopg 3 driver; other URLs unchanged."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str, synchronous: bool = True, immediate: bool = True) -> Engine:
    """On SQLite, `synchronous=False`: commits do not wait for the disk (`synchronous=NORMAL`
    under WAL: a process crash loses nothing, a power cut may lose the last commits, never
    consistency) and do not checkpoint the WAL; `immediate=False`: transactions start
    deferred, so a reading one does not hold the write lock (only for single statements: a
    deferred transaction that reads, then writes, can fail to upgrade). Both only for
    `make_statement_engine`."""
    url = normalise_url(url)
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            if not synchronous:
                cursor.execute("PRAGMA synchronous=NORMAL")
                # nor does it run WAL checkpoints (a checkpoint writes and syncs the database
                # file: milliseconds); the platform's other connections run them as they commit
                cursor.execute("PRAGMA wal_autocheckpoint=0")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


def make_statement_engine(url: str) -> Engine:
    """An engine for the marketplace gateway's single statements: its reads (outside the
    write lock on SQLite, one statement per snapshot on PostgreSQL) and its one INSERT per call,
    the cheapest durable-enough write. On PostgreSQL: autocommit (one statement, one round
    trip), no pre-ping (its caller retries a dropped connection once),
    `synchronous_commit=off`; on SQLite: deferred transactions, `synchronous=NORMAL`. Either way
    a commit does not wait for the disk: a database server crash or power cut can lose the last
    fraction of a second of recorded calls (never consistency; the ledger's own transactions
    keep waiting for the disk). A lost record is a call not charged, like a gateway crash
    between the app's answer and the INSERT."""
    url = normalise_url(url)
    if url.startswith("sqlite"):
        return make_engine(url, synchronous=False, immediate=False)
    engine = create_engine(url, isolation_level="AUTOCOMMIT", pool_size=10, max_overflow=20)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        with dbapi_conn.cursor() as cursor:
            cursor.execute("SET synchronous_commit TO off")

    return engine


class Disconnected(Exception):
    """The database had dropped the connection a `DirectStatement` ran on (now discarded); the
    statement may or may not have run."""


@dataclass(frozen=True)
class _Compiled:
    sql: str
    order: tuple[str, ...] | None  # positional parameters' names in order; None: by name
    process: Mapping[str, Callable[[Any], Any]]


class DirectStatement:
    """One statement compiled once and run straight on a DBAPI cursor: no `Connection`, no
    pool checkout and return per run. Here that takes 0.25-0.4 times as long as
    `engine.begin()` + `execute` on SQLite and 0.3-0.7 times on PostgreSQL, at p50 and at p99
    (`make bench-marketplace` measures both ways in the same run). Parameters pass through the
    bound columns' own bind processors, so values are stored exactly as the ORM stores them.

    Only for statements that commit by themselves: `make_statement_engine`'s connections
    (PostgreSQL in autocommit, SQLite without implicit transactions). The connections are the
    engine's, held checked out between runs, at most `connections` at once (more concurrent
    runs wait for one); `close` returns them. Thread-safe."""

    def __init__(self, engine: Engine, statement: Executable, connections: int = 4) -> None:
        self.engine, self.statement = engine, statement
        self._compiled: dict[tuple[str, ...], _Compiled] = {}
        self._idle: list[PoolProxiedConnection] = []
        self._slots = threading.BoundedSemaphore(connections)
        self._closed = False

    def _compile(self, keys: tuple[str, ...]) -> _Compiled:
        """The SQL for parameters `keys` (an INSERT names only the columns given), the order
        of positional parameters, and each parameter's bind processor."""
        statement = cast(ClauseElement, self.statement)
        compiled = statement.compile(dialect=self.engine.dialect, column_keys=list(keys))
        assert isinstance(compiled, SQLCompiler)
        process = {}
        for name, bind in compiled.binds.items():
            fn = bind.type.dialect_impl(self.engine.dialect).bind_processor(self.engine.dialect)
            if fn is not None:
                process[name] = fn
        order = tuple(compiled.positiontup or ()) if compiled.positional else None
        return _Compiled(compiled.string, order, process)

    def run(self, params: Mapping[str, Any]) -> Any:
        """Run the statement once; the first column of the first row it returns (as the driver
        gives it), or None. Raises `Disconnected` when the connection had been dropped, or
        the driver's own error."""
        keys = tuple(params)
        compiled = self._compiled.get(keys)
        if compiled is None:
            compiled = self._compiled[keys] = self._compile(keys)
        process = compiled.process
        values = {k: (process[k](v) if k in process else v) for k, v in params.items()}
        args = values if compiled.order is None else tuple(values[k] for k in compiled.order)
        with self._slots:
            conn = self._idle.pop() if self._idle else self.engine.raw_connection()
            try:
                cursor = conn.cursor()
                try:
                    cursor.execute(compiled.sql, args)
                    rows = cursor.fetchall() if cursor.description else []
                finally:
                    cursor.close()
            except self.engine.dialect.loaded_dbapi.Error as exc:
                if self.engine.dialect.is_disconnect(exc, conn.dbapi_connection, None):
                    conn.invalidate(exc)
                    conn.close()
                    raise Disconnected(str(exc)) from exc
                conn.close()
                raise
            except BaseException:
                conn.close()
                raise
            if self._closed:
                conn.close()
            else:
                self._idle.append(conn)
        return rows[0][0] if rows else None

    def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """The unit of work of an entry point: commit on success, roll back on any exception."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
