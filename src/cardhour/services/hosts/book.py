"""The hosts backend's view of the database (`backends.hosts.HostsBackend` is given one): the
hosts that joined, the containers wanted on them and what their agents reported. Each method
is one short transaction; the backend calls them from the reconcilers with none open.

A host is lost when its agent has not reported for `heartbeat_timeout` (or it was removed):
it leaves the inventory (its node becomes unschedulable), `lost` names it, and its containers
count as gone (an agent that comes back removes what is no longer wanted).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from cardhour.core.clock import Clock, as_utc
from cardhour.core.hosts import PENDING, ContainerInfo, HostInfo
from cardhour.db.engine import transaction
from cardhour.db.models import HostContainerRow, HostRow
from cardhour.store.hosts import hosts as store
from cardhour.store.hosts.hosts import AnyRow


def fingerprint(spec: dict[str, Any]) -> str:
    """What makes a container a different one: everything in its spec but the fields that can
    change under a running container (its attempt, its cluster's `/etc/hosts` and peers, and
    `stopped`: the same container, asked to stop keeping its disk)."""
    mutable = ("attempt", "hosts", "peers", "fingerprint", "stopped")
    kept = {k: v for k, v in spec.items() if k not in mutable}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]


#: how often `HostBook.hosts` reads every host's brief, not only the changed ones
RESYNC = timedelta(minutes=5)


class HostBook:
    def __init__(
        self, sessions: sessionmaker[Session], clock: Clock, heartbeat_timeout: timedelta
    ) -> None:
        self.sessions, self.clock, self.timeout = sessions, clock, heartbeat_timeout
        #: no host is lost for silence before this: agents need a heartbeat timeout to find a
        #: control plane that was down (an upgrade must not replace every running instance)
        self.trusting_since = clock.now()
        #: host id -> (inventory key, parsed): the last inventory read of each host
        self._inventories: dict[str, tuple[str, dict[str, Any]]] = {}
        self._listeners: list[Callable[[], None]] = []
        #: `hosts`' view, kept between calls: the directory version it is at, the briefs of
        #: the joined hosts not removed by id, and the list made of them with the silent ones
        self._lock = threading.Lock()
        self._version: int | None = None
        self._resynced_at = clock.now()
        self._briefs: dict[str, AnyRow] = {}
        self._said: tuple[int, frozenset[str], datetime] | None = None
        self._listed: list[HostInfo] = []

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call `listener` (from the caller's thread) after each commit that changed what is
        wanted on some host: the API's long-poll watch reads at once, not at its next poll."""
        self._listeners.append(listener)

    def _changed(self, touched: set[str]) -> None:
        if touched:
            for listener in list(self._listeners):
                listener()

    def lost_reason(
        self, removed_at: datetime | None, last_seen_at: datetime | None, now: datetime
    ) -> str | None:
        if removed_at is not None:
            return "host removed by the operator"
        if now - self.trusting_since <= self.timeout:
            return None
        if last_seen_at is None or now - as_utc(last_seen_at) > self.timeout:
            return self._silence()
        return None

    def _silence(self) -> str:
        return f"no heartbeat from its agent for over {self.timeout.total_seconds():.0f} s"

    def _lost(self, host: AnyRow, now: datetime) -> str | None:
        return self.lost_reason(host.removed_at, host.last_seen_at, now)

    def hosts(self) -> list[HostInfo]:
        """Every joined host not removed, silent ones included (`lost` says why), by name.

        Kept between calls: each call reads the directory's version, the hosts whose brief
        changed since the version it last saw (`HostDirectoryRow`), and the ids of silent
        hosts (an index range), so a thousand reporting hosts cost three small reads, not a
        thousand rows; an inventory is read and parsed again only when its key moved. Every
        `RESYNC` it reads every host's brief anyway (a row changed behind the ORM's back)."""
        now = self.clock.now()
        with self._lock, transaction(self.sessions) as session:
            version = store.directory_version(session)
            if self._version is None or now - self._resynced_at >= RESYNC:
                self._briefs = {r.id: r for r in store.briefs(session)}
                self._resynced_at = now
            elif version != self._version:
                for r in store.briefs_since(session, self._version):
                    if r.removed_at is None and r.joined_at is not None:
                        self._briefs[r.id] = r
                    else:
                        self._briefs.pop(r.id, None)
            self._version = version
            trusting = now - self.trusting_since <= self.timeout
            silent = frozenset(() if trusting else store.silent(session, now - self.timeout))
            said = (version, silent, self._resynced_at)
            if said == self._said:
                return list(self._listed)
            keys = {i: r.inventory_key for i, r in self._briefs.items() if r.inventory_key}
            stale = [i for i, key in keys.items() if self._inventories.get(i, ("",))[0] != key]
            for host_id, text in store.inventories(session, stale).items() if stale else ():
                self._inventories[host_id] = (keys[host_id], json.loads(text or "{}"))
        why = self._silence()
        self._listed = [
            HostInfo(
                r.name,
                r.data_centre,
                r.ib_leaf,
                r.ib_spine,
                r.address,
                self._inventories[r.id][1] if r.id in keys else {},
                r.standin,
                why if r.id in silent else None,
                inventory_key=keys.get(r.id, ""),
            )
            for r in sorted(self._briefs.values(), key=lambda r: str(r.name))
        ]
        self._said = said
        return list(self._listed)

    def want(self, workload: str, attempt: int, specs: dict[str, dict[str, Any]]) -> None:
        """`workload` runs on exactly the hosts of `specs` (host name → container spec):
        containers on other hosts are no longer wanted. A host whose container keeps its
        fingerprint keeps it running. A call for an older attempt than recorded is ignored."""
        touched: set[str] = set()
        with transaction(self.sessions) as session:
            rows = {r.host_id: r for r in store.containers_of_workload(session, workload, True)}
            if any(r.attempt > attempt for r in rows.values()):
                return
            query = select(HostRow.name, HostRow.id).where(HostRow.name.in_(list(specs)))
            ids: dict[str, str] = dict(session.execute(query).all())
            now = self.clock.now()
            for name, spec in specs.items():
                host_id = ids[name]
                full = {**spec, "workload": workload, "attempt": attempt}
                full["fingerprint"] = fingerprint(full)
                row = rows.get(host_id)
                if row is not None and "peers" not in full:  # set_peers' own, kept
                    before = json.loads(row.spec)
                    if before["fingerprint"] == full["fingerprint"] and "peers" in before:
                        full["peers"] = before["peers"]
                text = json.dumps(full, sort_keys=True)
                if row is None:
                    session.add(
                        HostContainerRow(
                            host_id=host_id,
                            workload=workload,
                            attempt=attempt,
                            spec=text,
                            wanted=True,
                            state=PENDING,
                            created_at=now,
                            updated_at=now,
                        )
                    )
                    touched.add(host_id)
                elif not row.wanted or row.spec != text:
                    row.spec, row.wanted, row.attempt, row.updated_at = text, True, attempt, now
                    touched.add(host_id)
            for host_id, row in rows.items():
                if host_id not in ids.values() and row.wanted:
                    row.wanted, row.updated_at = False, now
                    touched.add(host_id)
            store.bump_versions(session, touched)
        self._changed(touched)

    def set_peers(self, workload: str, peers: dict[str, Any]) -> None:
        """Every wanted container of `workload` lets in its cluster's `peers` (keys and ssh
        config, `backends.hosts`); the container keeps running (not part of the fingerprint)."""
        touched: set[str] = set()
        with transaction(self.sessions) as session:
            for row in store.containers_of_workload(session, workload, lock=True):
                spec = json.loads(row.spec)
                if row.wanted and spec.get("peers") != peers:
                    row.spec = json.dumps({**spec, "peers": peers}, sort_keys=True)
                    row.updated_at = self.clock.now()
                    touched.add(row.host_id)
            store.bump_versions(session, touched)
        self._changed(touched)

    def stop(self, workload: str) -> None:
        """Every wanted container of `workload` stops and keeps its disk (`stopped` in its
        spec; the agent reports `stopped` once it did). Idempotent."""
        touched: set[str] = set()
        with transaction(self.sessions) as session:
            for row in store.containers_of_workload(session, workload, lock=True):
                spec = json.loads(row.spec)
                if row.wanted and not spec.get("stopped"):
                    row.spec = json.dumps({**spec, "stopped": True}, sort_keys=True)
                    row.updated_at = self.clock.now()
                    touched.add(row.host_id)
            store.bump_versions(session, touched)
        self._changed(touched)

    def unwant(self, workload: str) -> None:
        """No container of `workload` is wanted anywhere any more. Idempotent."""
        touched: set[str] = set()
        with transaction(self.sessions) as session:
            for row in store.containers_of_workload(session, workload, lock=True):
                if row.wanted:
                    row.wanted, row.updated_at = False, self.clock.now()
                    touched.add(row.host_id)
            store.bump_versions(session, touched)
        self._changed(touched)

    def workloads(self, prefix: str) -> list[str]:
        """The workloads named `prefix…` wanted on some host (lost hosts included)."""
        with transaction(self.sessions) as session:
            return store.wanted_workloads(session, prefix)

    def containers(self, workload: str) -> list[ContainerInfo]:
        """The workload's containers on hosts that are not lost, wanted or still reported."""
        now = self.clock.now()
        with transaction(self.sessions) as session:
            rows = store.containers_of_workload(session, workload)
            hosts = (
                {h.id: h for h in store.briefs(session, [r.host_id for r in rows])} if rows else {}
            )
            found = []
            for row in rows:
                host = hosts.get(row.host_id)
                if host is None or self._lost(host, now) is not None:
                    continue
                found.append(
                    ContainerInfo(
                        host.name,
                        row.attempt,
                        row.wanted,
                        row.state,
                        json.loads(row.spec),
                        json.loads(row.report) if row.report else {},
                    )
                )
            return found

    def lost_hosts_of(self, workload: str) -> dict[str, str]:
        """Hosts the workload is wanted on that are lost (host name → why)."""
        now = self.clock.now()
        with transaction(self.sessions) as session:
            rows = [r for r in store.containers_of_workload(session, workload) if r.wanted]
            if not rows:
                return {}
            hosts = {h.id: h for h in store.briefs(session, [r.host_id for r in rows])}
        lost = {}
        for row in rows:
            host = hosts[row.host_id]
            why = self._lost(host, now)
            if why is not None:
                lost[host.name] = why
        return lost
