"""The long-poll watch (`api.routers.hosts.watch`): a change this process made wakes waiting
agents at once (the host book nudges the watch from a reconciler's thread), a change that
landed between an agent's report and its wait is not missed, and an unchanged host waits out
its timeout. The watch's own poll is set to a minute here, so only a nudge can answer."""

from __future__ import annotations

import asyncio
import threading

import pytest

from cardhour.api.routers.hosts import watch as watch_module
from cardhour.api.routers.hosts.watch import VersionWatch


def test_a_nudge_answers_at_once_and_none_is_missed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch_module, "POLL_SECONDS", 60.0)
    versions = {"h1": 1, "h2": 7}
    reads: list[list[str]] = []

    def read(ids: list[str]) -> dict[str, int]:
        reads.append(sorted(ids))
        return {i: versions[i] for i in ids}

    async def scenario() -> None:
        watch = VersionWatch(read)
        waiting = asyncio.create_task(watch.wait("h1", 1, 5))
        other = asyncio.create_task(watch.wait("h2", 7, 0.5))
        await asyncio.sleep(0.05)
        versions["h1"] = 2
        nudger = threading.Thread(target=watch.nudge)  # as a reconciler's thread does
        nudger.start()
        nudger.join()
        assert await waiting is True  # long before its 5 s
        assert await other is False  # h2 did not change: it waited its 0.5 s out
        assert reads and all(ids == ["h1", "h2"] for ids in reads[:1])  # one read for both

        # a change lands between an agent's report (which read version 2) and its wait, while
        # the watch is busy with another waiter: the nudge is spent on a read without h1
        keeper = asyncio.create_task(watch.wait("h2", 7, 5))
        seen = watch.sequence
        versions["h1"] = 3
        watch.nudge()
        await asyncio.sleep(0.1)
        assert reads[-1] == ["h2"]
        assert await watch.wait("h1", 2, 3, seen) is True  # read again at once, not in a minute
        keeper.cancel()

    asyncio.run(scenario())
