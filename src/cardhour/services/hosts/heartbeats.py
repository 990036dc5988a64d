"""The heartbeat of an idle host: a report that repeats the last one (same `reports.digest`,
no inventory) while the containers wanted on its host have not changed since that report was
recorded. Such a report changes nothing but the host's `last_seen_at`, so it is one UPDATE
(`store.hosts.touch_statement`) committed by itself on the statement engine
(`db.engine.make_statement_engine`: on PostgreSQL autocommit, not waiting for the disk; a
database crash can lose the last beats, which the next ones make good), run from the event
loop on PostgreSQL (`db.async_statement`: no thread hop), and its answer, the
containers wanted, comes from memory (`DesiredLists`). Anything else, a credential that does
not hold included, takes the full path (`reports.record` in a transaction), which also gives
the errors.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime
from typing import Any

from anyio import to_thread
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from cardhour.db.async_statement import AsyncStatement
from cardhour.db.engine import DirectStatement, transaction
from cardhour.services.hosts.reports import Desired
from cardhour.services.ids import hash_secret
from cardhour.store.hosts import hosts as store


class DesiredLists:
    """The containers wanted on each host at the newest version this process has read. Every
    change of the list moves the version (`HostBook` bumps it in the same transaction), so a
    list read at version V is the list at V for good. Thread-safe."""

    def __init__(self) -> None:
        self._lists: dict[str, tuple[int, list[dict[str, Any]]]] = {}
        self._lock = threading.Lock()

    def get(self, host_id: str, version: int) -> Desired | None:
        found = self._lists.get(host_id)
        return Desired(version, found[1]) if found is not None and found[0] == version else None

    def keep(self, host_id: str, desired: Desired) -> None:
        with self._lock:
            found = self._lists.get(host_id)
            if found is None or found[0] <= desired.version:
                self._lists[host_id] = (desired.version, desired.containers)


class Heartbeats:
    def __init__(self, statements: Engine, sessions: sessionmaker[Session]) -> None:
        """`statements`: an engine of `db.engine.make_statement_engine`; `sessions`: the
        platform's, for a wanted list this process has not read yet."""
        self.sessions = sessions
        self.lists = DesiredLists()
        touch = store.touch_statement()
        self._touch: AsyncStatement | DirectStatement = (
            AsyncStatement(statements, touch, connections=16)
            if statements.dialect.name == "postgresql"
            else DirectStatement(statements, touch, connections=8)
        )

    async def repeated(
        self, credential: str | None, host_name: str, now: datetime, report_digest: str | None
    ) -> tuple[str, Desired] | None:
        """(host id, what is wanted on it) when this report repeats the last, its heartbeat
        recorded; None (nothing written) when it does not or the credential does not hold.
        On the event loop: on PostgreSQL the UPDATE runs there (`AsyncStatement`); on SQLite,
        whose write lock can keep it waiting, and for a list not read yet, in a thread."""
        if report_digest is None or not credential:
            return None
        params = {
            "credential_hash_": hash_secret(credential),
            "name_": host_name,
            "digest_": report_digest,
            "now_": now,
        }
        if isinstance(self._touch, AsyncStatement):
            found = await self._touch.row(params)
        else:
            found = await to_thread.run_sync(self._touch.row, params)
        if found is None:
            return None
        host_id, version = str(found[0]), int(found[1])
        wanted = self.lists.get(host_id, version)
        if wanted is None:
            wanted = await to_thread.run_sync(self._read, host_id, version)
        return host_id, wanted

    def _read(self, host_id: str, version: int) -> Desired:
        with transaction(self.sessions) as session:
            rows = store.containers_of_host(session, host_id)
            wanted = Desired(version, [json.loads(r.spec) for r in rows if r.wanted])
        self.lists.keep(host_id, wanted)
        return wanted

    def close(self) -> None:
        self._touch.close()
