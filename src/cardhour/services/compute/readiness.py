"""The database side of the readiness gate (`core.readiness`): stages per placement, recorded
as they happen; a node that fails a check, or is lost while the instance runs, is drained and
replaced.

Stages of a placement are keyed by (instance, attempt, name). `allocated` and `booting` start
in the scheduling cycle (or in `swap`); the provisioning reconciler finishes `booting` and
runs the rest with no transaction open, recording each through `record` (fenced by its lease,
like every provisioning write).

Replacing nodes (`replace_nodes` for a gate failure, `repair_running` for a node lost under a
running instance) drains them, then:
- an instance on several nodes keeps its healthy nodes; each failed one is swapped for a free
  node as close in the fabric as possible (`scheduler.replace`), the placement is numbered anew
  and goes through `booting` and the whole gate again, under the same workload name (the backend
  brings up the new node and lets the old one go). `SWAPPED`;
- otherwise (one node, or no free node in the data centre) the instance goes back to `pending`
  and is placed again from scratch; its hold stays, its GPUs are released and the caller removes
  the workload. `PLACED_AGAIN`;
- after `MAX_ATTEMPTS` failed placements since the request (or since it last ran) it fails.
  `FAILED`.
A running instance is not billed from the loss until it is ready again.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cardhour.core.catalog import Catalog
from cardhour.core.readiness import STAGES
from cardhour.core.states import InstanceStatus
from cardhour.db.models import InstanceRow, InstanceStageRow
from cardhour.scheduler.replace import replacements
from cardhour.services.compute import fleet
from cardhour.services.compute.lifecycle import switch_status
from cardhour.services.compute.provisioning import Claim, apply_running, fenced
from cardhour.store.compute import instances as instance_store
from cardhour.store.compute import nodes as node_store
from cardhour.store.compute.instances import note

MAX_ATTEMPTS = 3
SWAPPED, PLACED_AGAIN, FAILED = "swapped", "placed_again", "failed"
STOPPED = "stopped"  # a run without GPUs whose host was lost


class Raced(Exception):
    """A replacement node's allocation version moved since the fleet was read: the caller rolls
    the transaction back and tries again on its next pass (another node may well do)."""


def _stage(session: Session, instance_id: str, attempt: int, name: str) -> InstanceStageRow | None:
    stmt = select(InstanceStageRow).where(
        InstanceStageRow.instance_id == instance_id,
        InstanceStageRow.attempt == attempt,
        InstanceStageRow.name == name,
    )
    return session.scalars(stmt).first()


def put(
    session: Session,
    instance_id: str,
    attempt: int,
    name: str,
    started: datetime,
    finished: datetime | None = None,
    outcome: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """Create or complete one stage (idempotent: a retried step rewrites the same row)."""
    row = _stage(session, instance_id, attempt, name)
    if row is None:
        row = InstanceStageRow(
            instance_id=instance_id, attempt=attempt, name=name, started_at=started
        )
        session.add(row)
    row.finished_at, row.outcome = finished, outcome
    if detail is not None:
        row.detail = json.dumps(detail, sort_keys=True)
    session.flush()


def placed(
    session: Session,
    row: InstanceRow,
    requested: datetime,
    now: datetime,
    nodes: list[str],
    weights: dict[str, Any] | None = None,
) -> None:
    """The scheduler placed the instance: `allocated` is done (with where its model weights
    come from, if it asked for some), `booting` starts."""
    detail: dict[str, Any] = {"nodes": nodes} | ({"weights": weights} if weights else {})
    put(session, row.id, row.attempt, "allocated", requested, now, "ok", detail)
    put(session, row.id, row.attempt, "booting", now)


def record(
    session: Session,
    claim: Claim,
    name: str,
    started: datetime,
    finished: datetime | None,
    outcome: str | None,
    detail: dict[str, Any] | None = None,
    lease_until: datetime | None = None,
) -> bool:
    """One stage of the claimed placement; False (nothing written) when the lease was lost.
    `lease_until`: the lease is extended to then, so a slow gate is not taken over mid-run."""
    row = fenced(session, claim)
    if row is None:
        return False
    if lease_until is not None:
        row.lease_expires_at = lease_until
    put(session, claim.instance_id, claim.attempt, name, started, finished, outcome, detail)
    if name != "ready":
        row.status_reason = f"readiness: {name.replace('_', ' ')} {outcome or 'running'}"
    return True


def replace_nodes(
    session: Session, catalog: Catalog, claim: Claim, bad: dict[str, str], now: datetime
) -> str | None:
    """The claimed placement failed the gate on the nodes of `bad` (node id → why): drain them
    and replace them (module docstring). Returns SWAPPED, PLACED_AGAIN or FAILED; None when
    the lease was lost."""
    row = fenced(session, claim)
    if row is None:
        return None
    said = _drain(session, bad, f"readiness gate of {row.name}")
    if row.disk_host is not None:  # a start from its kept disk, pinned: it stops, disk kept
        row.desired = "stopped"
        why = f"readiness gate failed ({said}); its disk stays on {row.disk_host}"
        switch_status(session, row, InstanceStatus.STOPPING, now, why)
        return FAILED
    if failed_placements(session, row) >= MAX_ATTEMPTS:
        switch_status(session, row, InstanceStatus.FAILED, now, f"readiness gate failed ({said})")
        return FAILED
    return _replace(
        session, catalog, row, claim.gpus_by_node, bad, said, "replacing failed node(s)", now
    )


def repair_running(
    session: Session,
    catalog: Catalog,
    instance_id: str,
    external_name: str,
    lost: dict[str, str],
    now: datetime,
) -> str | None:
    """The backend lost the nodes of `lost` (node id → why) under the running workload
    `external_name`: drain and replace them (module docstring). None when the instance no longer
    runs as that workload (a stop or another worker got there first)."""
    row = instance_store.get_instance(session, instance_id, lock=True)
    if row is None or row.status != InstanceStatus.RUNNING or row.external_name != external_name:
        return None
    if row.no_gpu:  # nothing to replace: billing stops, its disk stays on that host
        gone = sorted(set(lost) & set(json.loads(row.node_order or "[]")))
        if not gone:
            return None
        row.desired = "stopped"
        said = f"its host was lost ({lost[gone[0]]}): stopping; its disk stays on {gone[0]}"
        switch_status(session, row, InstanceStatus.STOPPING, now, said)
        return STOPPED
    held: dict[str, list[int]] = {}
    for alloc in node_store.allocations_of(session, row.id):
        held.setdefault(alloc.node_id, []).append(alloc.gpu_index)
    lost = {node: why for node, why in lost.items() if node in held}
    if not lost:
        return None
    said = _drain(session, lost, f"lost under {row.name}")
    return _replace(session, catalog, row, held, lost, said, "node(s) lost", now)


def _replace(
    session: Session,
    catalog: Catalog,
    row: InstanceRow,
    held: dict[str, list[int]],
    bad: dict[str, str],
    said: str,
    why: str,
    now: datetime,
) -> str:
    """Swap the bad nodes of a multi-node instance (SWAPPED), else place it again from scratch
    (PLACED_AGAIN). A running instance turns `provisioning` for the swap; one already
    provisioning stays so, with its timeout restarted and its lease released for the next pass."""
    chosen = swap(session, catalog, row, held, sorted(bad), now) if len(held) > 1 else None
    if chosen is None:
        switch_status(session, row, InstanceStatus.PENDING, now, f"{why}: {said}; placing again")
        return PLACED_AGAIN
    reason = f"{why}: {said}; {_arrows(chosen)}"
    if row.status == InstanceStatus.RUNNING:
        switch_status(session, row, InstanceStatus.PROVISIONING, now, reason)
    else:
        row.updated_at = now  # the provisioning timeout counts from the new placement
        row.lease_token, row.lease_expires_at = None, None  # the next pass boots it
        row.status_reason = reason
        note(session, row, now, reason)
    return SWAPPED


def swap(
    session: Session,
    catalog: Catalog,
    row: InstanceRow,
    gpus_by_node: dict[str, list[int]],
    failed: list[str],
    now: datetime,
) -> dict[str, str] | None:
    """Move the instance's GPUs on each of `failed` to a replacement node (`scheduler.replace`)
    and start a new placement there: the attempt advances, `allocated` (with what replaced what)
    and `booting` are recorded. None, with nothing changed, when a failed node has no
    replacement (the caller places the instance again); `Raced` when a replacement node changed
    under us (the caller's transaction must roll back)."""
    view = fleet.load(session, catalog)
    keep = [node for node in gpus_by_node if node not in failed]
    chosen = replacements(view.state, failed, keep)
    if chosen is None:
        return None
    for new in chosen.values():
        if not node_store.bump_version(session, new, view.versions[new]):
            raise Raced(f"node {new} changed while {row.name} was being repaired")
    for old, new in chosen.items():
        node_store.move_allocations(session, row.id, old, new)
    ranked = json.loads(row.node_order) if row.node_order else sorted(gpus_by_node)
    row.node_order = json.dumps([chosen.get(n, n) for n in ranked])  # ranks stay with the slot
    row.attempt += 1
    nodes = sorted(keep + list(chosen.values()))
    put(
        session,
        row.id,
        row.attempt,
        "allocated",
        now,
        now,
        "ok",
        {"nodes": nodes, "replaced": chosen},
    )
    put(session, row.id, row.attempt, "booting", now)
    return chosen


def _drain(session: Session, bad: dict[str, str], where: str) -> str:
    """Drain each node of `bad`; returns the failures as one line."""
    for node_id, why in sorted(bad.items()):
        node_store.drain(session, node_id, f"{where}: {why}")
    return "; ".join(f"{n}: {why}" for n, why in sorted(bad.items()))


def _arrows(chosen: dict[str, str]) -> str:
    return ", ".join(f"{old} → {new}" for old, new in sorted(chosen.items()))


def stages_of(session: Session, row: InstanceRow) -> list[InstanceStageRow]:
    """The stages of the instance's latest placement, in `core.readiness.STAGES` order."""
    stmt = select(InstanceStageRow).where(
        InstanceStageRow.instance_id == row.id, InstanceStageRow.attempt == row.attempt
    )
    found = list(session.scalars(stmt))
    return sorted(found, key=lambda s: (STAGES.index(s.name) if s.name in STAGES else 99, s.id))


def ready(session: Session, claim: Claim, connection: dict[str, Any], now: datetime) -> bool:
    """Every check passed: record `ready`, turn the instance `running` (billable from now; the
    state function settles the SLA of its request). False when the lease was lost."""
    if not record(session, claim, "ready", now, now, "ok"):
        return False
    return apply_running(session, claim, connection, now)  # settles the SLA of the request


def failed_placements(session: Session, row: InstanceRow) -> int:
    """Placements with a failed stage since the instance's current request (`requested_at`)
    and since it was last ready (a running instance whose node was lost counts afresh)."""
    stmt = select(InstanceStageRow.attempt).where(
        InstanceStageRow.instance_id == row.id, InstanceStageRow.outcome == "failed"
    )
    if row.requested_at is not None:
        stmt = stmt.where(InstanceStageRow.started_at >= row.requested_at)
    last_ready = select(func.max(InstanceStageRow.attempt)).where(
        InstanceStageRow.instance_id == row.id, InstanceStageRow.name == "ready"
    )
    stmt = stmt.where(InstanceStageRow.attempt > func.coalesce(last_ready.scalar_subquery(), -1))
    return len(set(session.scalars(stmt)))
