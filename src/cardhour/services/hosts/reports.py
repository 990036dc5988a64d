"""An agent's heartbeat: it reports the host's inventory and its containers, and gets back the
containers wanted on it (with the version of that list, which an agent waiting for work
watches).

Report contract: `containers` lists every container the agent holds for cardhour (running or
not); one it does not list has none on the host. A container no longer wanted and no longer
listed is forgotten. Reports are idempotent: the same report twice changes nothing more.

Most reports repeat the last one (an idle host says the same every heartbeat): those take
`services.hosts.heartbeats` (one UPDATE). `record` notes each report's `digest` and the version
it was applied at, which is what makes the next one a repeat or not.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from cardhour.core.errors import InvalidInput, NotFound
from cardhour.core.hosts import MAX_REPORT_TEXT, PENDING, STATES, inventory_key
from cardhour.db.models import HostContainerRow, HostRow
from cardhour.store.hosts import hosts as store


@dataclass(frozen=True)
class ContainerReport:
    workload: str
    state: str
    detail: dict[str, Any]  # ports, exit_code, error, logs, probes: as the agent sent them


@dataclass(frozen=True)
class Desired:
    version: int
    containers: list[dict[str, Any]]  # each a container spec (`backends.hosts` writes them)
    changed: bool = False  # the report changed the inventory or a container's state or report


def digest(
    containers: list[ContainerReport] | None,
    address: str | None,
    runtime: str | None,
    standin: bool | None,
) -> str | None:
    """What a report says apart from the inventory, in 32 hex digits; None when it says
    nothing of its containers (such a report is never a repeat)."""
    if containers is None:
        return None
    said = [address, runtime, standin, [[c.workload, c.state, c.detail] for c in containers]]
    return hashlib.sha256(json.dumps(said, sort_keys=True).encode()).hexdigest()[:32]


def record(
    session: Session,
    host: HostRow,
    now: datetime,
    containers: list[ContainerReport] | None,
    inventory: dict[str, Any] | None = None,
    address: str | None = None,
    runtime: str | None = None,
    standin: bool | None = None,
) -> Desired:
    """Apply one report to `host` and return what is wanted on it (`changed`: whether the
    report told something new, so the reconcilers have something to look at). `containers`
    None: the agent does not know yet (it just started): what was last reported stands.
    Notes the report's `digest` at the host's version (`services.hosts.heartbeats`)."""
    for report in containers or []:
        if report.state not in STATES:
            raise InvalidInput(f"container state {report.state!r}; one of {', '.join(STATES)}")
        for value in report.detail.values():
            if isinstance(value, str) and len(value) > MAX_REPORT_TEXT:
                raise InvalidInput(f"report of {report.workload} too long")
    host.last_seen_at = now
    host.report_digest = digest(containers, address, runtime, standin)
    host.reported_version = host.desired_version
    changed = False
    if inventory is not None:
        text = json.dumps(inventory, sort_keys=True)
        if host.inventory != text:
            host.inventory, host.inventory_key, changed = text, inventory_key(text), True
    if address is not None:
        host.address = address
    if runtime is not None:
        host.runtime = runtime
    if standin is not None:
        host.standin = standin
    if containers is None:
        session.flush()
        return replace(desired(session, host), changed=changed)
    reported = {r.workload: r for r in containers}
    kept = []
    for row in store.containers_of_host(session, host.id):
        found = reported.get(row.workload)
        if found is None and not row.wanted:
            store.delete_container(session, host.id, row.workload)
            continue
        kept.append(row)
        state = found.state if found is not None else PENDING
        detail = json.dumps(found.detail, sort_keys=True) if found is not None else None
        if (row.state, row.report) != (state, detail):
            row.state, row.report, row.updated_at = state, detail, now
            changed = True
    session.flush()
    return replace(desired(session, host, kept), changed=changed)


def desired(session: Session, host: HostRow, rows: list[HostContainerRow] | None = None) -> Desired:
    """What is wanted on `host`; `rows`: its containers when the caller has just read them."""
    if rows is None:
        rows = store.containers_of_host(session, host.id)
    return Desired(host.desired_version, [json.loads(r.spec) for r in rows if r.wanted])


def wanted_app(session: Session, host: HostRow, workload: str) -> str:
    """The app version (`core.replicas.version_key`) that `workload`, an app replica wanted on
    `host`, runs. NotFound when no such replica is wanted there (another host's included)."""
    for row in store.containers_of_workload(session, workload):
        if row.host_id == host.id and row.wanted:
            spec = json.loads(row.spec)
            if spec.get("kind") == "app":
                return str(spec["app"])
    raise NotFound(f"no app replica {workload!r} is wanted on host {host.name!r}")


def versions(session: Session, host_ids: list[str]) -> dict[str, int]:
    """The desired-list version of each host (what a waiting agent compares)."""
    return store.versions(session, host_ids)
