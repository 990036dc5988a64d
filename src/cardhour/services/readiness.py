"""The database side of the readiness gate (`core.readiness`): stages per placement, recorded
as they happen; a node that fails a check is drained and the instance placed again.

Stages of a placement are keyed by (instance, attempt, name). `allocated` and `booting` start
in the scheduling cycle; the provisioning reconciler finishes `booting` and runs the rest with
no transaction open, recording each through `record` (fenced by its lease, like every
provisioning write). `replace_nodes` drains the failing nodes and sends the instance back to
`pending` (its hold stays; its GPUs are released), at most `MAX_ATTEMPTS` failed placements
per request.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from cardhour.core.readiness import STAGES
from cardhour.core.states import InstanceStatus
from cardhour.db.models import InstanceRow, InstanceStageRow
from cardhour.services import sla
from cardhour.services.instances import switch_status
from cardhour.services.provisioning import Claim, apply_running, fenced
from cardhour.store import instances as instance_store
from cardhour.store import nodes as node_store

MAX_ATTEMPTS = 3


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


def replace_nodes(session: Session, claim: Claim, bad: dict[str, str], now: datetime) -> bool:
    """Drain each node of `bad` (node id → why) and place the instance again, or fail it once
    `MAX_ATTEMPTS` placements of the current request failed the gate. False when the lease was
    lost."""
    row = fenced(session, claim)
    if row is None:
        return False
    for node_id, why in sorted(bad.items()):
        node_store.drain(session, node_id, f"readiness gate of {row.name}: {why}")
    said = "; ".join(f"{n}: {why}" for n, why in sorted(bad.items()))
    if failed_placements(session, row) >= MAX_ATTEMPTS:
        switch_status(session, row, InstanceStatus.FAILED, now, f"readiness gate failed ({said})")
    else:
        switch_status(
            session, row, InstanceStatus.PENDING, now, f"replacing failed node(s): {said}"
        )
    return True


def stages_of(session: Session, row: InstanceRow) -> list[InstanceStageRow]:
    """The stages of the instance's latest placement, in `core.readiness.STAGES` order."""
    stmt = select(InstanceStageRow).where(
        InstanceStageRow.instance_id == row.id, InstanceStageRow.attempt == row.attempt
    )
    found = list(session.scalars(stmt))
    return sorted(found, key=lambda s: (STAGES.index(s.name) if s.name in STAGES else 99, s.id))


def ready(
    session: Session, claim: Claim, connection: dict[str, Any], now: datetime, sla_seconds: int
) -> bool:
    """Every check passed: record `ready`, turn the instance `running` (billable from now) and
    settle the SLA of its request. False when the lease was lost."""
    if not record(session, claim, "ready", now, now, "ok"):
        return False
    if not apply_running(session, claim, connection, now):
        return False
    row = instance_store.get_instance(session, claim.instance_id)
    if row is not None:
        sla.settle_ready(session, row, now, sla_seconds)
    return True


def failed_placements(session: Session, row: InstanceRow) -> int:
    """Placements of the instance's current request (since `requested_at`) with a failed stage."""
    stmt = select(InstanceStageRow.attempt).where(
        InstanceStageRow.instance_id == row.id, InstanceStageRow.outcome == "failed"
    )
    if row.requested_at is not None:
        stmt = stmt.where(InstanceStageRow.started_at >= row.requested_at)
    return len(set(session.scalars(stmt)))
