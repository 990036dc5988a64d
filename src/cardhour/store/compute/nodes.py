"""Nodes and GPU allocations, and the fleet inventory's version.

Every change to the inventory (a node added, changed, no longer reported, drained or resumed)
calls `inventory_changed` in its transaction; allocations never do.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, event, func, select, update
from sqlalchemy.orm import Session

from cardhour.db.locking import for_update
from cardhour.db.models import AllocationRow, AppReplicaRow, AppRow, FleetInventoryRow, NodeRow

_CHANGED = "cardhour.fleet_inventory_changed"  # a key of `Session.info`


def list_nodes(session: Session, lock: bool = False) -> list[NodeRow]:
    stmt = select(NodeRow).order_by(NodeRow.id)
    if lock:
        stmt = for_update(stmt).execution_options(populate_existing=True)
    return list(session.scalars(stmt))


def get_nodes(session: Session, node_ids: Iterable[str]) -> list[NodeRow]:
    """The nodes of those ids that exist, by id (not the whole fleet)."""
    wanted = sorted(set(node_ids))
    if not wanted:
        return []
    return list(session.scalars(select(NodeRow).where(NodeRow.id.in_(wanted)).order_by(NodeRow.id)))


def add_node(session: Session, row: NodeRow) -> None:
    session.add(row)
    session.flush()
    inventory_changed(session)


def inventory_version(session: Session) -> str | None:
    """The fleet inventory's version as committed (None only in a database built without the
    migrations' first row and never changed since)."""
    return session.scalar(select(FleetInventoryRow.version).where(FleetInventoryRow.id == 1))


def inventory_changed(session: Session) -> None:
    """This transaction changes the fleet inventory: a new version is written when it commits,
    as its last statement, so the version row's lock is taken after every node's and cannot
    close a lock cycle (a rollback writes nothing)."""
    session.info[_CHANGED] = True


@event.listens_for(Session, "before_commit")
def _write_inventory_version(session: Session) -> None:
    if session.in_nested_transaction() or not session.info.pop(_CHANGED, False):
        return
    session.flush()
    version = uuid.uuid4().hex
    stmt = update(FleetInventoryRow).where(FleetInventoryRow.id == 1).values(version=version)
    if not session.execute(stmt).rowcount:  # type: ignore[attr-defined]
        session.add(FleetInventoryRow(id=1, version=version))
        session.flush()


@event.listens_for(Session, "after_rollback")
def _forget_inventory_change(session: Session) -> None:
    session.info.pop(_CHANGED, None)


def node_classes(session: Session) -> list[tuple[Any, ...]]:
    """The nodes grouped by what decides whether a request could ever fit on them: rows of
    (schedulable, data centre, GPU model, GPUs, CPUs, memory GB, has an IB leaf, node count),
    in a stable order."""
    has_leaf = NodeRow.ib_leaf.is_not(None)
    keys = (
        NodeRow.schedulable,
        NodeRow.data_centre,
        NodeRow.gpu_model,
        NodeRow.gpu_count,
        NodeRow.cpus,
        NodeRow.memory_gb,
        has_leaf,
    )
    stmt = select(*keys, func.count()).group_by(*keys).order_by(*keys)
    return [tuple(row) for row in session.execute(stmt)]


def replica_shares(session: Session) -> list[tuple[str, str, str, int, int, int]]:
    """What app replicas hold: (replica id, node id, GPU indices "0,1", milli per GPU, CPU
    milli, memory MiB)."""
    stmt = select(
        AppReplicaRow.id,
        AppReplicaRow.node_id,
        AppReplicaRow.gpus,
        AppReplicaRow.milli,
        AppReplicaRow.cpu_milli,
        AppReplicaRow.memory_mib,
    ).order_by(AppReplicaRow.id)
    return [tuple(row) for row in session.execute(stmt)]  # type: ignore[misc]


def replicas_by_node(session: Session) -> dict[str, list[tuple[AppReplicaRow, str | None]]]:
    """Every app replica's share, by node, with its app's slug (None if the app is gone)."""
    rows = list(session.scalars(select(AppReplicaRow).order_by(AppReplicaRow.id)))
    ids = {row.app_id for row in rows}
    slugs: dict[str, str] = {}
    if ids:
        stmt = select(AppRow.id, AppRow.slug).where(AppRow.id.in_(ids))
        slugs = {app_id: slug for app_id, slug in session.execute(stmt)}
    held: dict[str, list[tuple[AppReplicaRow, str | None]]] = defaultdict(list)
    for row in rows:
        held[row.node_id].append((row, slugs.get(row.app_id)))
    return held


def used_gpus_by_node(session: Session) -> dict[str, set[int]]:
    used: dict[str, set[int]] = defaultdict(set)
    for node_id, gpu in session.execute(select(AllocationRow.node_id, AllocationRow.gpu_index)):
        used[node_id].add(gpu)
    return used


def allocations_by_instance(session: Session) -> dict[str, dict[str, set[int]]]:
    """Every allocation: instance id → node id → GPU indices."""
    held: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    stmt = select(AllocationRow.instance_id, AllocationRow.node_id, AllocationRow.gpu_index)
    for instance_id, node_id, gpu in session.execute(stmt):
        held[instance_id][node_id].add(gpu)
    return held


def allocations_of(session: Session, instance_id: str) -> list[AllocationRow]:
    stmt = select(AllocationRow).where(AllocationRow.instance_id == instance_id)
    return list(session.scalars(stmt.order_by(AllocationRow.node_id, AllocationRow.gpu_index)))


def bump_version(session: Session, node_id: str, expected: int) -> bool:
    """Optimistic guard: advance the node's allocation version iff it is still `expected`."""
    result = session.execute(
        update(NodeRow)
        .where(NodeRow.id == node_id, NodeRow.allocation_version == expected)
        .values(allocation_version=expected + 1)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def add_allocations(session: Session, instance_id: str, gpus_by_node: dict[str, list[int]]) -> None:
    for node_id, gpus in gpus_by_node.items():
        for gpu in gpus:
            session.add(AllocationRow(instance_id=instance_id, node_id=node_id, gpu_index=gpu))
    session.flush()


def move_allocations(session: Session, instance_id: str, old: str, new: str) -> None:
    """The instance's GPUs on node `old` move to the same GPU indices on node `new`; both
    nodes' versions advance."""
    rows = [r for r in allocations_of(session, instance_id) if r.node_id == old]
    gpus = [r.gpu_index for r in rows]
    session.execute(
        delete(AllocationRow).where(
            AllocationRow.instance_id == instance_id, AllocationRow.node_id == old
        )
    )
    session.execute(
        update(NodeRow)
        .where(NodeRow.id.in_([old, new]))
        .values(allocation_version=NodeRow.allocation_version + 1)
    )
    add_allocations(session, instance_id, {new: gpus})


def release_allocations(session: Session, instance_id: str) -> list[str]:
    """Free every GPU of the instance; returns the node ids touched (their versions advance)."""
    rows = allocations_of(session, instance_id)
    node_ids = sorted({r.node_id for r in rows})
    session.execute(delete(AllocationRow).where(AllocationRow.instance_id == instance_id))
    for node_id in node_ids:
        session.execute(
            update(NodeRow)
            .where(NodeRow.id == node_id)
            .values(allocation_version=NodeRow.allocation_version + 1)
        )
    session.flush()
    return node_ids


def drain(session: Session, node_id: str, reason: str) -> None:
    """Take the node out of scheduling until an operator resumes it (`resume`)."""
    _set_drain(session, node_id, reason)


def resume(session: Session, node_id: str) -> bool:
    """Clear a drain; returns False when the node is unknown."""
    return _set_drain(session, node_id, None)


def _set_drain(session: Session, node_id: str, reason: str | None) -> bool:
    """Drained (with `reason`) or schedulable again (None); the allocation version moves so a
    scheduling cycle that read the node retries."""
    inventory_changed(session)
    result = session.execute(
        update(NodeRow)
        .where(NodeRow.id == node_id)
        .values(
            schedulable=reason is None,
            drained_reason=reason,
            allocation_version=NodeRow.allocation_version + 1,
        )
    )
    session.flush()
    return bool(result.rowcount)  # type: ignore[attr-defined]
