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
    a new one, so the statement must be idempotent. A driver error comes out as SQLAlchemy's
    `DBAPIError` subclass, as `Connection.execute` raises it.
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
            self.close()  # the old loop's connections
            self._loop, self._slots = loop, asyncio.Semaphore(self.connections)
        if not self._slots.locked():
            await self._slots.acquire()  # at once
        else:
            try:
                await asyncio.wait_for(self._slots.acquire(), self.wait)
            except TimeoutError:
                message = f"no connection for the statement within {self.wait:g} s"
                raise SATimeoutError(message) from None
        try:
            return await self._run(compiled.sql, args)
        finally:
            self._slots.release()

    async def _run(self, sql: str, args: Any) -> tuple[Any, ...] | None:
        for attempt in (1, 2):
            conn = self._idle.pop() if self._idle else await self._connect()
            try:
                cursor = await conn.execute(sql, args, prepare=True)
                row = await cursor.fetchone() if cursor.description else None
            except BaseException as exc:
                dropped = conn.broken
                await conn.close()  # dropped, or left mid-statement: not used again
                if dropped and attempt == 1:
                    self.close()  # the server dropped one: it has likely dropped them all
                    continue
                if isinstance(exc, psycopg.Error):  # as `Connection.execute` raises it
                    raise DBAPIError.instance(
                        sql, args, exc, psycopg.Error,
                        connection_invalidated=dropped, dialect=self.dialect,
                    ) from exc  # fmt: skip
                raise
            self._idle.append(conn)
            return None if row is None else tuple(row)
        raise AssertionError("unreachable")

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
        for setting in STATEMENT_SETTINGS:
            await conn.execute(setting)
        return conn

    def close(self) -> None:
        """Close the connections held, without a round trip (also from another thread once
        their loop has stopped); a run after this opens new ones."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.pgconn.finish()
