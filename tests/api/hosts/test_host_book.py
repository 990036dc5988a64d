"""The host book's view of the hosts (`HostBook.hosts`, read by the inventory reconciler every
tick) is kept between calls: a tick where only heartbeats happened reads no host's row, and
every change the ORM makes (a join, a new inventory or address, a removal) or a silence shows
at the next call; a row changed behind the ORM's back shows at the next resync."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event, text

from cardhour.services.hosts.book import RESYNC
from cardhour.store.hosts import hosts as store
from tests.api.hosts.conftest import LOST_AFTER, HostsApi, inventory


@contextmanager
def _statements(api: HostsApi) -> Iterator[list[str]]:
    """The SQL the platform's engine runs meanwhile."""
    seen: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    event.listen(api.platform.engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(api.platform.engine, "before_cursor_execute", note)


def _view(api: HostsApi) -> dict[str, tuple[int, str | None, str | None]]:
    """name -> (GPUs, address, lost)."""
    return {
        h.name: (len(h.inventory.get("gpus", [])), h.address, h.lost)
        for h in api.platform.host_book.hosts()
    }


def test_the_view_follows_every_change_and_reads_nothing_when_none(hosts_api: HostsApi) -> None:
    api = hosts_api
    book = api.platform.host_book
    a, b = api.enrol("a", address="10.0.0.1"), api.enrol("b", address="10.0.0.2")
    assert _view(api) == {"a": (8, "10.0.0.1", None), "b": (8, "10.0.0.2", None)}

    a.report(), b.report()  # heartbeats: nothing the view holds moved
    with _statements(api) as seen:
        first = book.hosts()
        assert book.hosts() == first
    # per call: the directory's version and (once trusting ends) the silent hosts' ids
    assert sum("FROM host_directory" in s for s in seen) == 2, seen
    assert not any("hosts.name" in s or "hosts.inventory" in s for s in seen), seen

    a.report(inventory=inventory(count=4, host="a"), address="10.0.0.9")  # a GPU card less
    api.enrol("c")  # enrolled and joined
    assert _view(api) == {
        "a": (4, "10.0.0.9", None),
        "b": (8, "10.0.0.2", None),
        "c": (8, "10.0.0.1", None),  # the enrolling default: 10.0.0.<len(name)>
    }
    r = api.client.delete("/api/v1/admin/hosts/b", headers=api.admin)
    assert r.status_code == 200, r.text
    assert set(_view(api)) == {"a", "c"}

    api.clock.advance(LOST_AFTER - 5)
    a.report()
    api.clock.advance(10)  # c has been silent for longer than LOST_AFTER, a has not
    view = _view(api)
    assert view["a"][2] is None and "heartbeat" in str(view["c"][2])
    api.client.post("/api/v1/agent/report", json={"host": "c", "containers": []})
    assert _view(api)["c"][2] is not None  # no credential: nothing was recorded

    with api.platform.engine.begin() as conn:  # an operator's hand in the database
        conn.execute(text("UPDATE hosts SET address = '10.7.7.7' WHERE name = 'a'"))
    assert _view(api)["a"][1] == "10.0.0.9"
    api.clock.advance(RESYNC.total_seconds())
    assert _view(api)["a"][1] == "10.7.7.7"


def test_a_savepoint_moves_the_directory_only_when_its_transaction_commits(
    hosts_api: HostsApi,
) -> None:
    api = hosts_api
    api.enrol("a", address="10.0.0.1")
    assert _view(api)["a"][1] == "10.0.0.1"
    with api.platform.sessions() as session, session.begin():
        before = store.directory_version(session)
        with session.begin_nested():
            row = store.get_by_name(session, "a")
            assert row is not None
            row.address = "10.0.0.2"
        assert store.directory_version(session) == before  # not at the savepoint's release
        inner = session.begin_nested()
        row.ib_leaf = "leaf-9"
        session.flush()
        inner.rollback()  # the address noted before it still counts
    with api.platform.sessions() as session:
        assert store.directory_version(session) == before + 1
    assert _view(api)["a"][1] == "10.0.0.2"
