"""A report that repeats the last is one UPDATE on the statement engine (the heartbeat of an
idle host; `services.hosts.heartbeats`), and only such a report: one that says something new,
comes after the wanted containers changed, or carries a credential that no longer holds takes
the full path in a transaction (with its errors). A long poll is held its wait less a random
jitter and says how long; new work ends it with that work."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from cardhour.api.routers.hosts.watch import JITTER
from tests.api.hosts.conftest import LOST_AFTER, Agent, HostsApi
from tests.api.hosts.test_containers import _launch


@contextmanager
def statements(api: HostsApi) -> Iterator[list[str]]:
    """The SQL statements the platform's transactional engine runs meanwhile (the pool's pings
    and SQLite's BEGIN left out; the heartbeat's UPDATE runs on a raw cursor elsewhere)."""
    seen: list[str] = []

    def note(conn: Any, cursor: Any, sql: str, *args: Any) -> None:
        if sql.strip().upper() != "SELECT 1" and not sql.startswith("BEGIN"):
            seen.append(" ".join(sql.split()))

    engine = api.platform.engine
    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)


def _steady(agent: Agent) -> dict[str, Any]:
    """Report twice (the first may say something new), return the second answer."""
    agent.report()
    return agent.report()


def test_a_repeated_report_takes_no_transaction_and_keeps_the_host(hosts_api: HostsApi) -> None:
    api = hosts_api
    agent = api.enrol("idle")
    api.settle()
    before = _steady(agent)
    for _ in range(3):
        api.clock.advance(LOST_AFTER - 1)
        with statements(api) as seen:
            answer = agent.report()
        assert answer == before
        assert seen == []
        api.settle()
    host = api.client.get("/api/v1/admin/hosts", headers=api.admin).json()[0]
    assert host["state"] == "ready"  # 3 × 39 s silent but for the repeats: their beats count


def test_new_news_or_new_work_takes_the_full_path(hosts_api: HostsApi) -> None:
    api = hosts_api
    agent = api.enrol("busy")
    api.settle()
    empty = _steady(agent)
    assert empty["containers"] == []
    user = api.signup()
    _launch(api, user, name="job")
    api.settle()
    wanted = agent.report()  # the same report, but the wanted containers moved
    assert wanted["version"] > empty["version"]
    [spec] = wanted["containers"]
    report = [{"workload": spec["workload"], "state": "running", "ports": {"22": 40022}}]
    with statements(api) as seen:
        assert agent.report(report)["containers"] == [spec]  # news: recorded
    assert any(s.startswith("SELECT") and "host_containers" in s for s in seen), seen
    with statements(api) as seen:
        assert agent.report(report)["containers"] == [spec]  # a repeat: answered from memory
    assert seen == []
    [found] = api.platform.host_book.containers(spec["workload"])
    assert (found.state, found.report["ports"]) == ("running", {"22": 40022})


def test_a_repeat_with_a_revoked_or_borrowed_credential_is_refused(hosts_api: HostsApi) -> None:
    api = hosts_api
    mine, other = api.enrol("mine"), api.enrol("other")
    api.settle()
    _steady(mine)
    _steady(other)
    borrowed = mine.client.post(
        "/api/v1/agent/report",
        json={"host": "other", "containers": []},
        headers={"Authorization": f"Bearer {mine.credential}"},
    )
    assert borrowed.status_code == 403
    removed = api.client.delete("/api/v1/admin/hosts/mine", headers=api.admin)
    assert removed.status_code in (200, 204), removed.text
    again = mine.client.post(
        "/api/v1/agent/report",
        json={"host": "mine", "containers": []},
        headers={"Authorization": f"Bearer {mine.credential}"},
    )
    assert again.status_code == 401


def _poll(agent: Agent, wait: float, since: int) -> dict[str, Any]:
    r = agent.client.post(
        f"/api/v1/agent/report?wait={wait}&since={since}",
        json={"host": agent.host, "containers": []},
        headers={"Authorization": f"Bearer {agent.credential}"},
    )
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def test_a_long_poll_is_held_its_jittered_wait_and_says_how_long(hosts_api: HostsApi) -> None:
    api = hosts_api
    agent = api.enrol("waits")
    api.settle()
    version = _steady(agent)["version"]
    for _ in range(3):
        started = time.monotonic()
        answer = _poll(agent, 0.8, version)
        took = time.monotonic() - started
        assert answer["version"] == version and answer["containers"] == []
        assert 0.8 * (1 - JITTER) - 0.01 <= answer["held_seconds"] <= 0.8 + 0.2
        assert took >= answer["held_seconds"]
    assert agent.report()["held_seconds"] == 0  # a plain heartbeat is not held


def test_new_work_ends_a_held_long_poll_with_it(hosts_api: HostsApi) -> None:
    api = hosts_api
    agent = api.enrol("woken")
    api.settle()
    version = _steady(agent)["version"]
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(_poll, agent, 30, version)
        time.sleep(0.3)  # the poll is held by now
        assert not held.done()
        _launch(api, api.signup(), name="job")
        api.settle()  # places it: the host's wanted containers move
        answer = held.result(timeout=15)
    assert answer["version"] > version
    assert len(answer["containers"]) == 1  # the new work, read when it came
    assert answer["held_seconds"] < 15
