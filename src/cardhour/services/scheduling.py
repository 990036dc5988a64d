"""The scheduling cycle: pending instances → placements, all decisions in one transaction.

Run by one leader at a time (advisory lock on PostgreSQL). Each placement is guarded by the
nodes' allocation versions read in the snapshot; a node changed since is skipped this cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from cardhour.core.catalog import Catalog
from cardhour.core.states import InstanceStatus
from cardhour.db.locking import try_leader_lock
from cardhour.scheduler import Placement, PlacementRequest, Policy
from cardhour.services import fleet
from cardhour.services.instances import switch_status
from cardhour.store import instances as store
from cardhour.store import nodes as node_store


class _NodeChanged(Exception):
    """A node's allocation version moved since the snapshot was taken."""


@dataclass
class CycleResult:
    leader: bool = True
    placed: list[str] = field(default_factory=list)
    pending: dict[str, str] = field(default_factory=dict)  # instance id -> reason


def run_cycle(session: Session, catalog: Catalog, policy: Policy, now: datetime) -> CycleResult:
    if not try_leader_lock(session, "cardhour-scheduler"):
        return CycleResult(leader=False)
    result = CycleResult()
    pending = store.list_in_status(session, [InstanceStatus.PENDING.value], lock=True)
    if not pending:
        return result
    snap = fleet.snapshot(session)
    versions = {n.spec.id: n.version for n in snap.nodes}
    for row in pending:
        decision = policy.place(snap, PlacementRequest((row.gpu_model,), row.gpu_count))
        if not isinstance(decision, Placement):
            row.status_reason = f"pending: {decision.reason}"
            result.pending[row.id] = decision.reason
            continue
        nodes = sorted(decision.gpus_by_node)
        try:
            with session.begin_nested():  # all the nodes' versions advance, or none do
                if not all(node_store.bump_version(session, n, versions[n]) for n in nodes):
                    raise _NodeChanged
        except _NodeChanged:
            result.pending[row.id] = "a node changed during the cycle; retrying"
            continue
        for node_id in nodes:
            versions[node_id] += 1
        snap.apply(decision)
        node_store.add_allocations(session, row.id, decision.gpus_by_node)
        row.data_centre = decision.data_centre
        row.price_micros = catalog.prices.on_demand(row.gpu_model, decision.data_centre).micros
        row.attempt += 1
        row.external_name = f"ch-{row.id}-{row.attempt}"
        placed_on = ", ".join(nodes)
        switch_status(session, row, InstanceStatus.PROVISIONING, now, f"placed on {placed_on}")
        result.placed.append(row.id)
    session.flush()
    return result
