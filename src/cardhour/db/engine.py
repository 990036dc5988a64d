"""Engine and unit of work. Dialect differences live here and in `locking.py`, nowhere else.

SQLite: one process; every transaction starts with `BEGIN IMMEDIATE`, so transactions that write
are serialised and no check-then-act race exists. PostgreSQL: READ COMMITTED plus row locks.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Dialect, Engine, Executable, create_engine, event, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as SATimeoutError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler


def normalise_url(url: str) -> str:
    """`postgresql://` → the psycopg 3 driver; other URLs unchanged."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


#: connections a PostgreSQL pool keeps open once opened (`make_engine`)
POOL_SIZE = 40


def _private_file(url: str) -> None:
    """Create a SQLite database file readable by its owner only (0600; SQLite gives its WAL
    and shared-memory files the same mode); an existing file is left as it is."""
    path = make_url(url).database
    if not path or path == ":memory:" or path.startswith("file:") or os.path.exists(path):
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))


def make_engine(url: str, synchronous: bool = True, immediate: bool = True) -> Engine:
    """On SQLite, `synchronous=False`: commits do not wait for the disk (`synchronous=NORMAL`
    under WAL: a process crash loses nothing, a power cut may lose the last commits, never
    consistency) and do not checkpoint the WAL; `immediate=False`: transactions start
    deferred, so a reading one does not hold the write lock (only for single statements: a
    deferred transaction that reads, then writes, can fail to upgrade). Both only for
    `make_statement_engine`.

    On PostgreSQL the pool keeps up to `POOL_SIZE` connections: as many as the API's request
    threads (anyio's 40) can use at once, so a burst does not open and close a connection per
    request (with 10 kept, every request past the tenth paid a new server process)."""
    url = normalise_url(url)
    if url.startswith("sqlite"):
        _private_file(url)
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
    return create_engine(url, pool_pre_ping=True, pool_size=POOL_SIZE, max_overflow=10)


#: a PostgreSQL session of single quick statements: commits do not wait for the disk; one
#: stuck on a lock or a stalled server fails, not hangs
STATEMENT_SETTINGS = ("SET synchronous_commit TO off", "SET statement_timeout TO '10s'")


def make_statement_engine(url: str) -> Engine:
    """An engine for the marketplace gateway's single statements: its reads (outside the
    write lock on SQLite, one statement per snapshot on PostgreSQL) and its one INSERT per call,
    the cheapest durable-enough write. On PostgreSQL: autocommit (one statement, one round
    trip), no pre-ping (its caller retries a dropped connection once),
    `synchronous_commit=off`, `statement_timeout` 10 s (its statements are single quick ones);
    on SQLite: deferred transactions, `synchronous=NORMAL`. Either way a commit does not wait
    for the disk: a database server crash or power cut can lose the last
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
            for setting in STATEMENT_SETTINGS:
                cursor.execute(setting)

    return engine


@dataclass(frozen=True)
class Compiled:
    """A statement compiled for one dialect and one set of parameter names."""

    sql: str
    names: frozenset[str]  # every parameter the statement binds
    order: tuple[str, ...] | None  # positional parameters' names in order; None: by name
    process: Mapping[str, Callable[[Any], Any]]

    def args(self, params: Mapping[str, Any]) -> Any:
        """The driver's parameters: each value through its column's bind processor."""
        if not self.names <= params.keys():
            raise ValueError(f"parameters missing: {sorted(self.names - params.keys())}")
        process = self.process
        values = {k: (process[k](v) if k in process else v) for k, v in params.items()}
        return values if self.order is None else tuple(values[k] for k in self.order)


def compile_for(
    cache: dict[tuple[str, ...], Compiled],
    dialect: Dialect,
    statement: Executable,
    params: Mapping[str, Any],
) -> Compiled:
    """`statement` compiled for `dialect` and the names of `params` (an INSERT names only the
    columns given), kept in `cache` by those names."""
    keys = tuple(params)
    found = cache.get(keys)
    if found is None:
        clause = cast(ClauseElement, statement)
        compiled = clause.compile(dialect=dialect, column_keys=list(keys))
        assert isinstance(compiled, SQLCompiler)
        process = {}
        for name, bind in compiled.binds.items():
            fn = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if fn is not None:
                process[name] = fn
        order = tuple(compiled.positiontup or ()) if compiled.positional else None
        found = cache[keys] = Compiled(compiled.string, frozenset(compiled.binds), order, process)
    return found


class DirectStatement:
    """One statement compiled once and run straight on a DBAPI cursor: no `Connection`, no
    pool checkout and return per run. Here that takes 0.25-0.4 times as long as
    `engine.begin()` + `execute` on SQLite and 0.3-0.75 times on PostgreSQL, at p50 and at p99
    (`make bench-marketplace` measures both ways in the same run). Parameters pass through the
    bound columns' own bind processors, so values are stored exactly as the ORM stores them;
    every parameter the statement binds must be given (no column defaults are filled in).

    Only for statements that commit by themselves: `make_statement_engine`'s connections
    (PostgreSQL in autocommit, SQLite without implicit transactions). The connections are the
    engine's, held checked out between runs, at most `connections` at once; a run waits up to
    `wait` seconds for one (then `sqlalchemy.exc.TimeoutError`, as the pool raises). A driver
    error comes out as SQLAlchemy's `DBAPIError` subclass, as `Connection.execute` raises it;
    after a dropped connection (`connection_invalidated`) every connection held here and the
    engine's pool are replaced, so a retry runs on a new one. `close` returns the connections.
    Thread-safe."""

    def __init__(
        self, engine: Engine, statement: Executable, connections: int = 4, wait: float = 30.0
    ) -> None:
        self.engine, self.statement, self.wait = engine, statement, wait
        self._compiled: dict[tuple[str, ...], Compiled] = {}
        self._idle: list[PoolProxiedConnection] = []
        self._lock = threading.Lock()  # guards `_idle` and `_closed`
        self._slots = threading.BoundedSemaphore(connections)
        self._closed = False

    def run(self, params: Mapping[str, Any]) -> Any:
        """Run the statement once; the first column of the first row it returns (as the driver
        gives it), or None."""
        row = self.row(params)
        return None if row is None else row[0]

    def row(self, params: Mapping[str, Any]) -> tuple[Any, ...] | None:
        """Run the statement once; the first row it returns (as the driver gives it), or
        None."""
        compiled = compile_for(self._compiled, self.engine.dialect, self.statement, params)
        args = compiled.args(params)
        if not self._slots.acquire(timeout=self.wait):
            raise SATimeoutError(f"no connection for the statement within {self.wait:g} s")
        try:
            return self._run(compiled.sql, args)
        finally:
            self._slots.release()

    def _run(self, sql: str, args: Any) -> tuple[Any, ...] | None:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self.engine.raw_connection()
        dialect = self.engine.dialect
        try:
            cursor = conn.cursor()
            try:
                cursor.execute(sql, args)
                rows = cursor.fetchall() if cursor.description else []
            finally:
                cursor.close()
        except dialect.loaded_dbapi.Error as exc:
            dropped = dialect.is_disconnect(exc, conn.dbapi_connection, None)
            if dropped:
                conn.invalidate(exc)
                self._drop_all()
            conn.close()
            raise DBAPIError.instance(
                sql, args, exc, dialect.loaded_dbapi.Error,
                connection_invalidated=dropped, dialect=dialect,
            ) from exc  # fmt: skip
        except BaseException:
            conn.close()
            raise
        with self._lock:
            if not self._closed:
                self._idle.append(conn)
                conn = None
        if conn is not None:
            conn.close()
        return tuple(rows[0]) if rows else None

    def _drop_all(self) -> None:
        """The server dropped a connection: it has likely dropped the others too."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.invalidate()
            conn.close()
        self.engine.dispose(close=False)  # the pool's other connections go on their return

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


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
