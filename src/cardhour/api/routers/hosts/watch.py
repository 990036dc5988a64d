"""Agents waiting for work: a report with `?wait=` returns as soon as the containers wanted on
its host change (their version moves past `since`), or when the wait ends.

One watcher per API process reads the versions of every waiting host in one query, so a
thousand waiting agents cost one small query, not a thousand. It reads when this process
changed some versions (`nudge`: the host book calls it after each commit that bumps one, from
the reconcilers' threads) and every `POLL_SECONDS` otherwise (a change made by another process
of the same database). A waiter that registers after a nudge it may have missed (the change
landed between its report and its wait) asks for a read at once (`seen`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool

#: how often the watch reads without a nudge: another process's change reaches its agents
#: within this long (a change of this process: at once)
POLL_SECONDS = 1.0
#: a long poll ends up to this share of its wait early, at random (`hold_for`)
JITTER = 1 / 16


def hold_for(wait: float) -> float:
    """How long to hold a long poll of `wait` s: a little less, at random. Agents answered
    together (after a pause of this process, say) report again together, each heartbeat, a
    burst the last of them waits through; a random end spreads them out within a few rounds.
    (Consul adds such a jitter; here it is taken off, so a host never reports later than its
    heartbeat.)"""
    return wait * (1 - JITTER * random.random())


class VersionWatch:
    def __init__(self, read: Callable[[list[str]], dict[str, int]]) -> None:
        """`read(host_ids)`: each host's current version (a blocking database read)."""
        self._read = read
        self._waiting: dict[str, list[tuple[int, asyncio.Future[bool]]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._nudged = asyncio.Event()
        #: nudges so far; a report notes it before its transaction (`wait`'s `seen`)
        self.sequence = 0

    def nudge(self) -> None:
        """Some hosts' versions changed (thread-safe; nothing to do while nobody waits)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed meanwhile (shutdown)
                loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        self.sequence += 1
        self._nudged.set()

    async def wait(self, host_id: str, since: int, timeout: float, seen: int | None = None) -> bool:
        """Return once `host_id`'s version differs from `since` (True), or after `timeout` s
        (False). `seen`: `sequence` before the caller read `since`; a nudge since then makes
        the watch read at once."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # first use, or a new loop (a test client's): start afresh
            self._loop, self._nudged, self._task = loop, asyncio.Event(), None
        future: asyncio.Future[bool] = loop.create_future()
        entry = (since, future)
        self._waiting.setdefault(host_id, []).append(entry)
        if seen is not None and seen != self.sequence:
            self._nudged.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())
        timer = loop.call_later(timeout, _settle, future, False)
        try:
            return await future
        finally:
            timer.cancel()
            waiters = self._waiting.get(host_id, [])
            if entry in waiters:
                waiters.remove(entry)
            if not waiters:
                self._waiting.pop(host_id, None)

    async def _run(self) -> None:
        while self._waiting:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._nudged.wait(), POLL_SECONDS)
            self._nudged.clear()
            ids = list(self._waiting)
            if not ids:
                break
            try:
                versions = await run_in_threadpool(self._read, ids)
            except Exception:  # noqa: BLE001 - a failed read is retried on the next one
                continue
            for host_id in ids:
                for since, future in self._waiting.get(host_id, []):
                    if versions.get(host_id) != since:
                        _settle(future, True)


def _settle(future: asyncio.Future[bool], moved: bool) -> None:
    if not future.done():
        future.set_result(moved)
