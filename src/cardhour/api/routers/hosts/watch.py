"""Agents waiting for work: a report with `?wait=` returns as soon as the containers wanted on
its host change (their version moves past `since`), or when the wait ends.

One watcher per API process reads the versions of every waiting host in one query each tick,
so a thousand waiting agents cost one small query per tick, not a thousand.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool

TICK_SECONDS = 0.1


class VersionWatch:
    def __init__(self, read: Callable[[list[str]], dict[str, int]]) -> None:
        """`read(host_ids)`: each host's current version (a blocking database read)."""
        self._read = read
        self._waiting: dict[str, list[tuple[int, asyncio.Future[None]]]] = {}
        self._task: asyncio.Task[None] | None = None

    async def wait(self, host_id: str, since: int, timeout: float) -> bool:
        """Return once `host_id`'s version differs from `since` (True), or after `timeout` s
        (False)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (since, future)
        self._waiting.setdefault(host_id, []).append(entry)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            waiters = self._waiting.get(host_id, [])
            if entry in waiters:
                waiters.remove(entry)
            if not waiters:
                self._waiting.pop(host_id, None)

    async def _run(self) -> None:
        while self._waiting:
            await asyncio.sleep(TICK_SECONDS)
            ids = list(self._waiting)
            if not ids:
                break
            try:
                versions = await run_in_threadpool(self._read, ids)
            except Exception:  # noqa: BLE001 - a failed tick is retried on the next one
                continue
            for host_id in ids:
                for since, future in self._waiting.get(host_id, []):
                    if versions.get(host_id) != since and not future.done():
                        future.set_result(None)
