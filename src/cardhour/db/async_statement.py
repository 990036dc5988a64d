"""One statement run from the event loop on PostgreSQL, without a thread.

A request handled on the event loop that hands its one statement to a thread pays for the hop
twice over in a busy process: the thread waits for the GIL behind the loop, the loop waits for
it behind the thread (measured with 1,000 agents: an idle host's heartbeat, 0.5-0.8 ms of work,
answered at p50 in 20-30 ms through the pool, 8-10 ms without it). `AsyncStatement` runs a
statement of `make_statement_engine`'s kind (autocommit, `STATEMENT_SETTINGS`) on psycopg's
async connections, compiled and bound as `DirectStatement` does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import psycopg
from sqlalchemy import Engine, Executable
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as SATimeoutError

from cardhour.db.engine import STATEMENT_SETTINGS, Compiled, compile_for


class AsyncStatement:
    """`statement` on PostgreSQL (`engine`: its URL and dialect), at most `connections` at
    once, held open between runs; a run waits up to `wait` s for one (then SQLAlchemy's
    `TimeoutError`). A connection the server dropped is closed and the run tried once more on
    a new one, so the statement must be idempotent. A driver error (failing to connect
    included) comes out as SQLAlchemy's `DBAPIError` subclass, as `Connection.execute` raises
    it.
    One event loop at a time: a run on another loop (a test's) starts afresh."""

    def __init__(
        self, engine: Engine, statement: Executable, connections: int = 4, wait: float = 30.0
    ) -> None:
        if engine.dialect.name != "postgresql":
            raise ValueError("AsyncStatement runs on PostgreSQL only")
        self.dialect, self.statement = engine.dialect, statement
        self.conninfo = engine.url.set(drivername="postgresql").render_as_string(False)
        self.connections, self.wait = connections, wait
        self._compiled: dict[tuple[str, ...], Compiled] = {}
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def row(self, params: Mapping[str, Any]) -> tuple[Any, ...] | None:
        """Run the statement once; the first row it returns (as the driver gives it), or
        None."""
        compiled = compile_for(self._compiled, self.dialect, self.statement, params)
        args = compiled.args(params)
        loop = asyncio.get_running_loop()
        if loop is not self._loop or self._slots is None:
            self.close()  # another loop's connections (a test's), or none
            self._loop, self._slots = loop, asyncio.Semaphore(self.connections)
        slots = self._slots
        if not slots.locked():
            await slots.acquire()  # at once
        else:
            try:
                await asyncio.wait_for(slots.acquire(), self.wait)
            except TimeoutError:
                message = f"no connection for the statement within {self.wait:g} s"
                raise SATimeoutError(message) from None
        try:
            return await self._run(loop, compiled.sql, args)
        finally:
            slots.release()

    async def _run(
        self, loop: asyncio.AbstractEventLoop, sql: str, args: Any
    ) -> tuple[Any, ...] | None:
        for attempt in (1, 2):
            conn: psycopg.AsyncConnection[Any] | None = None
            try:
                conn = self._idle.pop() if self._idle else await self._connect()
                cursor = await conn.execute(sql, args, prepare=True)
                row = await cursor.fetchone() if cursor.description else None
            except BaseException as exc:
                dropped = conn is not None and conn.broken
                if conn is not None:
                    conn.pgconn.finish()  # dropped, or left mid-statement: not used again
                if not isinstance(exc, psycopg.Error):  # cancelled, say: not run again
                    raise
                if dropped and attempt == 1:
                    self._finish_idle()  # the server dropped one: it has likely dropped all
                    continue
                raise DBAPIError.instance(
                    sql, args, exc, psycopg.Error,
                    connection_invalidated=dropped, dialect=self.dialect,
                ) from exc  # fmt: skip
            if self._loop is loop:
                self._idle.append(conn)
            else:  # closed meanwhile
                conn.pgconn.finish()
            return None if row is None else tuple(row)
        raise AssertionError("unreachable")

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
        try:
            for setting in STATEMENT_SETTINGS:
                await conn.execute(setting)
        except BaseException:
            conn.pgconn.finish()
            raise
        return conn

    def close(self) -> None:
        """Close the connections held, without a round trip (also from another thread once
        their loop has stopped); a run still going closes its own when done, and a run after
        this opens new ones."""
        self._loop = self._slots = None
        self._finish_idle()

    def _finish_idle(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.pgconn.finish()
