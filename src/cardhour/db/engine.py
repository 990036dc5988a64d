"""Engine and unit of work. Dialect differences live here and in `locking.py`, nowhere else.

SQLite: one process; every transaction starts with `BEGIN IMMEDIATE`, so transactions that write
are serialised and no check-then-act race exists. PostgreSQL: READ COMMITTED plus row locks.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker


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
