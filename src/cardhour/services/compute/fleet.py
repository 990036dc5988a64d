"""The fleet as the database knows it: node sync from a backend's inventory, engine snapshots."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from cardhour.core.catalog import Catalog
from cardhour.core.errors import Conflict, NotFound
from cardhour.core.topology import NodeSpec
from cardhour.db.models import NodeRow, gpu_indices
from cardhour.scheduler import FleetState, Placement
from cardhour.services.compute import placement
from cardhour.store.compute import instances as instance_store
from cardhour.store.compute import nodes as store


def spec_of(row: NodeRow) -> NodeSpec:
    return NodeSpec(
        id=row.id,
        data_centre=row.data_centre,
        gpu_model=row.gpu_model,
        gpu_count=row.gpu_count,
        cpus=row.cpus,
        memory_gb=row.memory_gb,
        ib_leaf=row.ib_leaf,
        ib_spine=row.ib_spine,
        ib_rails=row.ib_rails,
        ib_gbps_per_rail=row.ib_gbps_per_rail,
    )


def specs_of(session: Session, node_ids: Iterable[str]) -> dict[str, NodeSpec]:
    """The nodes of those ids as the inventory recorded them (the backend's view, which on
    Slurm is not the fleet file's)."""
    wanted = set(node_ids)
    return {row.id: spec_of(row) for row in store.get_nodes(session, wanted)}


def inventory_version(session: Session) -> str | None:
    """The fleet inventory's version: it moves with every node added, changed, no longer
    reported, drained or resumed (`store.compute.nodes.inventory_changed`)."""
    return store.inventory_version(session)


def sync_nodes(session: Session, inventory: Iterable[NodeSpec]) -> tuple[int, int]:
    """Upsert nodes from a backend's inventory; nodes it no longer reports become unschedulable.

    Returns (added, updated). A node keeps its allocations whatever happens here. A sync that
    changes nothing (the usual tick) reads the nodes without locking them.
    """
    specs = list(inventory)
    if not _differs(store.list_nodes(session), specs):
        return 0, 0
    # locked: a readiness drain committing meanwhile must not be overwritten
    existing = {row.id: row for row in store.list_nodes(session, lock=True)}
    seen: set[str] = set()
    added = updated = 0
    for spec in specs:
        seen.add(spec.id)
        row = existing.get(spec.id)
        fields = _fields(spec, row)
        if row is None:
            store.add_node(session, NodeRow(id=spec.id, allocation_version=0, **fields))
            added += 1
        elif any(getattr(row, k) != v for k, v in fields.items()):
            for key, value in fields.items():
                setattr(row, key, value)
            row.allocation_version += 1  # a scheduling cycle that read the old node must retry
            updated += 1
    for node_id, row in existing.items():
        if node_id not in seen and row.schedulable:
            row.schedulable = False
            row.allocation_version += 1
            updated += 1
    if updated:  # (an added node recorded its own change)
        store.inventory_changed(session)
    session.flush()
    return added, updated


def _fields(spec: NodeSpec, row: NodeRow | None) -> dict[str, object]:
    """The node row's columns as the inventory reports them."""
    return dict(
        data_centre=spec.data_centre,
        gpu_model=spec.gpu_model,
        gpu_count=spec.gpu_count,
        cpus=spec.cpus,
        memory_gb=spec.memory_gb,
        ib_leaf=spec.ib_leaf,
        ib_spine=spec.ib_spine,
        ib_rails=spec.ib_rails,
        ib_gbps_per_rail=spec.ib_gbps_per_rail,
        schedulable=row is None or row.drained_reason is None,
    )


def _differs(rows: Iterable[NodeRow], specs: list[NodeSpec]) -> bool:
    """Whether `sync_nodes` would change anything."""
    existing = {row.id: row for row in rows}
    for spec in specs:
        row = existing.pop(spec.id, None)
        if row is None or any(getattr(row, k) != v for k, v in _fields(spec, row).items()):
            return True
    return any(row.schedulable for row in existing.values())


@dataclass
class FleetView:
    """One read of the fleet: the engine's state, and the node rows' specs and versions."""

    state: FleetState
    specs: dict[str, NodeSpec]  # by node id
    versions: dict[str, int]  # allocation_version as read, for the optimistic guard
    placements: dict[str, Placement] = field(default_factory=dict)  # by instance id, as held


def load(session: Session, catalog: Catalog, all_free: bool = False) -> FleetView:
    """The fleet as the engine sees it: instances' allocations and app replicas' shares held;
    `all_free` ignores them (what could ever fit)."""
    rows = store.list_nodes(session)
    specs = {row.id: spec_of(row) for row in rows}
    state, held = placement.build_held(
        list(specs.values()),
        {m.id for m in catalog.gpu_models if m.nvlink},
        {row.id for row in rows if not row.schedulable},
        None if all_free else store.allocations_by_instance(session),
        set() if all_free else instance_store.bare_metal_ids(session),
        () if all_free else _shares(session),
    )
    return FleetView(state, specs, {row.id: row.allocation_version for row in rows}, held)


def _shares(session: Session) -> list[placement.Share]:
    return [
        placement.Share(rid, node, gpu_indices(gpus), milli, cpu, mem)
        for rid, node, gpus, milli, cpu, mem in store.replica_shares(session)
    ]


@dataclass(frozen=True)
class ReplicaShare:
    """What one app replica holds on a node (`gpu_milli` of each GPU in `gpus`)."""

    replica: str
    app: str | None  # its slug; None when the app is gone
    version: int
    gpus: tuple[int, ...]
    gpu_milli: int
    cpu_milli: int
    memory_mib: int


@dataclass(frozen=True)
class NodeUsage:
    row: NodeRow
    used_gpus: list[int]  # by instances
    replicas: list[ReplicaShare]

    @property
    def free_gpus(self) -> int:
        """Whole cards that neither an instance nor a replica holds any of."""
        taken = set(self.used_gpus) | {g for r in self.replicas for g in r.gpus}
        return self.row.gpu_count - len(taken)


def node_usage(session: Session) -> list[NodeUsage]:
    """Every node with the indices of its GPUs instances use and what app replicas hold (the
    operator's fleet view)."""
    used = store.used_gpus_by_node(session)
    held = store.replicas_by_node(session)
    return [
        NodeUsage(row, sorted(used.get(row.id, set())), [
            ReplicaShare(
                r.id, slug, r.version, r.gpu_indices, r.milli, r.cpu_milli, r.memory_mib
            )
            for r, slug in held.get(row.id, [])
        ])
        for row in store.list_nodes(session)
    ]  # fmt: skip


def resume(session: Session, node_id: str) -> None:
    """Clear a readiness drain. NotFound for an unknown node; Conflict when the node is not
    drained (it may be unschedulable because the backend stopped reporting it)."""
    row = next(iter(store.get_nodes(session, [node_id])), None)
    if row is None:
        raise NotFound(f"no node {node_id!r}")
    if row.drained_reason is None:
        raise Conflict(f"node {node_id} is not drained")
    store.resume(session, node_id)
