"""The scheduling cycle: pending instances → placements, all decisions in one transaction.

Run by one leader at a time (advisory lock on PostgreSQL). One `FleetState` per cycle; each
pending instance, oldest first, is bound on it so later ones see earlier placements. Each
placement is guarded by its nodes' allocation versions as read; if one moved since, the
placement is forgotten in the state and the instance waits for the next cycle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from cardhour.core.catalog import Catalog
from cardhour.core.clock import as_utc
from cardhour.core.states import InstanceStatus
from cardhour.db.locking import try_leader_lock
from cardhour.db.models import InstanceRow
from cardhour.scheduler import FleetState, Pending, Placement, Scheduler, TypicalWorkload
from cardhour.services.billing import metering, pricing
from cardhour.services.compute import capacity, fleet, placement, readiness
from cardhour.services.compute.lifecycle import fix_price, switch_status
from cardhour.services.storage import volumes
from cardhour.store.compute import instances as store
from cardhour.store.compute import nodes as node_store


class _NodeChanged(Exception):
    """A node's allocation version moved since the fleet was read."""


@dataclass
class CycleResult:
    leader: bool = True
    placed: list[str] = field(default_factory=list)
    pending: dict[str, str] = field(default_factory=dict)  # instance id -> reason


def pending_since(row: InstanceRow) -> datetime:
    """When the placement now being made was asked for: the instance's last move to `pending`
    (its launch, a start, a node replaced). Not `InstanceRow.requested_at`, the SLA's clock,
    which a node replaced by the platform does not restart."""
    return as_utc(row.updated_at)  # only a status change moves it (`switch_status`)


def _bind(
    scheduler: Scheduler,
    state: FleetState,
    shapes: dict[str, placement.NodeShape],
    row: InstanceRow,
    catalog: Catalog,
) -> Placement | Pending:
    """Bind the row on `state`: where its volumes are, if it mounts any (their data centre,
    their host for a host's own volume); else first in each data centre that caches its model
    weights, if it asked for some, then anywhere."""
    if row.placement_dc is not None:
        request = placement.to_request(
            shapes,
            row.id,
            row.gpu_model,
            row.gpu_count,
            row.placement_dc,
            row.bare_metal,
            row.placement_host,
        )
        return request if isinstance(request, Pending) else scheduler.bind(state, request)
    if row.weights is not None:
        for dc in catalog.dcs_with(row.weights):
            request = placement.to_request(
                shapes, row.id, row.gpu_model, row.gpu_count, dc, row.bare_metal
            )
            if isinstance(request, Pending):
                break
            decision = scheduler.bind(state, request)
            if not isinstance(decision, Pending):
                return decision
    request = placement.to_request(
        shapes, row.id, row.gpu_model, row.gpu_count, bare_metal=row.bare_metal
    )
    return request if isinstance(request, Pending) else scheduler.bind(state, request)


def _place_without_gpus(session: Session, row: InstanceRow, now: datetime) -> None:
    """A start without GPUs (`services.storage.starts`): on the host its disk is kept on, with
    nothing allocated (the container gets `core.hosts.share` of no GPU); its price was fixed
    when it was started."""
    host = row.disk_host
    assert host is not None
    requested = pending_since(row)
    row.node_order = json.dumps([host])
    row.attempt += 1
    row.external_name = f"ch-{row.id}-{row.attempt}"
    if row.placement_dc is not None:
        volumes.placed(session, row, [host])
    said = f"placed on {host} without GPUs (CPU only, to reach its disk)"
    switch_status(session, row, InstanceStatus.PROVISIONING, now, said)
    readiness.placed(session, row, requested, now, [host])


def typical_workload(
    session: Session, shapes: dict[str, placement.NodeShape], window: int
) -> TypicalWorkload:
    """FGD's typical workload from the `window` most recent instance requests (any status)."""
    return placement.typical_workload(shapes, store.recent_requests(session, window))


def make_scheduler(session: Session, policy: str, window: int) -> Scheduler:
    """The engine running `policy`, with the typical workload of the fleet as it is now."""
    shapes = capacity.current(session).shapes
    return Scheduler(policy, typical_workload(session, shapes, window))


def run_cycle(
    session: Session, catalog: Catalog, scheduler: Scheduler, now: datetime, window: int
) -> CycleResult:
    """Place pending instances; `window` sizes the typical workload, refreshed once per cycle."""
    if not try_leader_lock(session, "cardhour-scheduler"):
        return CycleResult(leader=False)
    result = CycleResult()
    pending = store.list_in_status(session, [InstanceStatus.PENDING.value], lock=True)
    if not pending:
        return result
    view = fleet.load(session, catalog)
    state = view.state
    prices = pricing.history(session, catalog)
    shapes = placement.node_shapes(state)
    # A fresh engine per cycle: the shared one (also read by API threads) is never mutated.
    scheduler = Scheduler(scheduler.profile, typical_workload(session, shapes, window))
    for row in pending:
        if row.no_gpu and row.disk_host is not None:
            at = state.index.get(row.disk_host)
            if at is None or not state.schedulable[at]:
                row.status_reason = result.pending[row.id] = f"pending: {row.disk_host} is not up"
                continue
            _place_without_gpus(session, row, now)
            result.placed.append(row.id)
            continue
        decision = _bind(scheduler, state, shapes, row, catalog)
        if isinstance(decision, Pending):
            row.status_reason = f"pending: {decision.reason}"
            result.pending[row.id] = decision.reason
            continue
        where = placement.assignment(state, decision)
        nodes = sorted(where.gpus_by_node)
        try:
            with session.begin_nested():  # all the nodes' versions advance, or none do
                if not all(node_store.bump_version(session, n, view.versions[n]) for n in nodes):
                    raise _NodeChanged
        except _NodeChanged:
            state.forget(decision)
            result.pending[row.id] = "a node changed during the cycle; retrying"
            continue
        for node_id in nodes:
            view.versions[node_id] += 1
        node_store.add_allocations(session, row.id, where.gpus_by_node)
        row.node_order = json.dumps(nodes)
        row.data_centre = where.data_centre
        if not metering.on_plan(row, now):  # a prepaid plan keeps the price it was paid at
            fix_price(session, row, prices, now)
        row.attempt += 1
        row.external_name = f"ch-{row.id}-{row.attempt}"
        placed_on = ", ".join(nodes)
        requested = pending_since(row)
        said, weights = f"placed on {placed_on}", None
        if row.weights is not None:
            plan = catalog.weights_plan(row.weights, where.data_centre)
            weights = plan.detail()
            said += f"; weights {plan.weights.id} " + (
                "cached here"
                if plan.local
                else f"copied in first (~{plan.copy_seconds} s at {catalog.weights_copy_gbps} Gb/s)"
            )
        if row.placement_dc is not None:  # pinned: it may mount volumes
            volumes.placed(session, row, nodes)
        switch_status(session, row, InstanceStatus.PROVISIONING, now, said)
        readiness.placed(session, row, requested, now, nodes, weights)
        result.placed.append(row.id)
    session.flush()
    return result
