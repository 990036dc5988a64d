"""One read model of an instance, shared by the API (`api.convert.compute` maps it to
`InstanceRead`) and the console's instance pages (which format it for the templates).

`summary` is what a list shows (status, the workload, nodes held, price, cost so far, held,
connection with its ssh endpoint and published ports);
`detail` adds the events, the readiness stages of the latest placement with the nccl gate's
figures, the cluster layout and the weights plan. `topology` is the cluster page's extra: the
fabric the nodes sit on and the bus bandwidth the gate expects. Reads only; amounts stay `Money`
(each caller picks its format).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from cardhour.core import cluster
from cardhour.core import readiness as readiness_rules
from cardhour.core.catalog import Catalog
from cardhour.core.clock import as_utc
from cardhour.core.cluster import ClusterNode
from cardhour.core.money import Money
from cardhour.core.states import InstanceStatus
from cardhour.db.models import AllocationRow, InstanceEventRow, InstanceRow
from cardhour.services.billing import wallet
from cardhour.services.compute import fleet, instances, readiness, workload
from cardhour.services.storage import volumes
from cardhour.store.compute import instances as instance_store
from cardhour.store.compute import nodes as node_store


@dataclass(frozen=True)
class EventView:
    at: datetime
    from_status: str | None
    to_status: str
    reason: str | None


@dataclass(frozen=True)
class StageView:
    """One readiness stage of the latest placement; `detail` parsed (`{}` when empty)."""

    name: str
    started_at: datetime
    finished_at: datetime | None
    outcome: str | None
    detail: dict[str, Any]


@dataclass(frozen=True)
class WeightsView:
    """Model weights asked for at launch and where they come from (the `allocated` stage's
    plan, else the default mount)."""

    id: str
    mount: str
    local: bool
    copy_seconds: int


@dataclass(frozen=True)
class SshView:
    """Where the instance's sshd answers (the backend's connection `host`, `port`, `user`)."""

    host: str
    port: int
    user: str


@dataclass(frozen=True)
class InstanceView:
    """An instance as its owner sees it. Times are UTC-aware. The detail fields (`events`,
    `stages`, `gate`, `cluster`, `weights`) are empty unless `detailed`."""

    id: str
    name: str
    status: str
    status_reason: str | None
    gpu: str
    count: int
    image: str
    plan: str
    plan_until: datetime | None
    at_expiry: str | None
    movable: bool
    bare_metal: bool
    no_gpu: bool  # started without GPUs: `price` is per hour
    data_centre: str | None
    nodes: list[str]  # the nodes it holds GPUs on now, sorted
    price: Money  # per card-hour
    cost_so_far: Money  # usage charged so far
    # what is left of the hold set aside at launch or start; None where not read (`summary`)
    held: Money | None
    connection: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    command: str | None = None  # the renter's workload, as launched
    env: dict[str, str] = field(default_factory=dict)
    ports: list[int] = field(default_factory=list)  # container ports asked to be published
    ssh: SshView | None = None  # while the backend says where sshd answers
    published: dict[str, str] = field(default_factory=dict)  # container port → "host:port"
    detailed: bool = False
    events: list[EventView] = field(default_factory=list)
    stages: list[StageView] = field(default_factory=list)
    gate: dict[str, Any] | None = None  # the nccl gate's figures, once it has any
    cluster: list[ClusterNode] = field(default_factory=list)  # while it holds nodes
    weights: WeightsView | None = None
    volumes: list[tuple[str, str]] = field(default_factory=list)  # (volume name, mount path)

    @property
    def currency(self) -> str:
        return self.price.currency


@dataclass(frozen=True)
class Topology:
    """Where a cluster's nodes sit: the in-node link, the IB leaves and spines, each node's
    leaf, and the bus bandwidth the nccl gate expects (None when it holds no nodes)."""

    link: str
    leaves: list[str]
    spines: list[str]
    leaf_of: dict[str, str | None]
    expected_busbw: float | None


def summary(
    session: Session, row: InstanceRow, stages: bool = False, held: bool = True
) -> InstanceView:
    """A list's view of `row`; with `stages`, the readiness stages too (the console's live
    table shows them as marks); without `held`, no read of the hold's account (`held` None)."""
    return _summary(
        row,
        nodes_of(session, row),
        Money(wallet.held_for(session, row), row.currency) if held else None,
        _stages(session, row) if stages else [],
    )


def _summary(
    row: InstanceRow, nodes: list[str], held: Money | None, stages: list[StageView]
) -> InstanceView:
    connection = json.loads(row.connection) if row.connection else None
    work = workload.of(row)
    return InstanceView(
        id=row.id,
        name=row.name,
        status=row.status,
        status_reason=row.status_reason,
        gpu=row.gpu_model,
        count=row.gpu_count,
        image=row.image,
        plan=row.plan,
        plan_until=as_utc(row.plan_until) if row.plan_until else None,
        at_expiry=row.plan_at_expiry,
        movable=row.movable,
        bare_metal=row.bare_metal,
        no_gpu=row.no_gpu,
        data_centre=row.data_centre,
        nodes=nodes,
        price=Money(row.price_micros, row.currency),
        cost_so_far=Money(row.billed_micros, row.currency),
        held=held,
        connection=connection,
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
        command=work.command,
        env=work.env,
        ports=work.ports,
        ssh=_ssh(connection),
        published=_published(connection),
        stages=stages,
    )


def _ssh(connection: dict[str, Any] | None) -> SshView | None:
    """From the backend's `host`, `port` (default 22) and `user` (default root)."""
    host = (connection or {}).get("host")
    if not isinstance(host, str) or not host:
        return None
    assert connection is not None
    try:
        port = int(connection.get("port", 22))
    except (TypeError, ValueError):
        return None
    return SshView(host, port, str(connection.get("user") or "root"))


def _published(connection: dict[str, Any] | None) -> dict[str, str]:
    """The backend's `published`: container port → "host:port" where it is reachable."""
    found = (connection or {}).get("published")
    if not isinstance(found, dict):
        return {}
    return {str(port): str(where) for port, where in found.items()}


def detail(session: Session, row: InstanceRow) -> InstanceView:
    """`summary` with the events, stages, gate figures, cluster layout, weights plan and
    volumes."""
    stages = _stages(session, row)
    allocations = instances.allocations_of(session, row)
    return replace(
        _summary(
            row,
            nodes_of(session, row, allocations),
            Money(wallet.held_for(session, row), row.currency),
            [],
        ),
        detailed=True,
        events=[
            EventView(as_utc(e.at), e.from_status, e.to_status, e.reason)
            for e in events_of(session, row)
        ],
        stages=stages,
        gate=next((s.detail for s in stages if s.name == "nccl_gate" and s.detail), None),
        cluster=cluster_of(session, row, allocations),
        weights=_weights(row, stages),
        volumes=[(v.name, v.mount_path or "") for v in volumes.attached_to(session, row)]
        if row.placement_dc is not None
        else [],
    )


def launched(launch: instances.Launched) -> InstanceView:
    """`detail` of an instance `instances.launch` created in this very transaction, from what
    the launch wrote instead of reads: no allocations or readiness stages yet (the reconcilers
    add them once it commits), its one event the `created` one, its hold what the launch set
    aside."""
    row = launch.row
    return replace(
        _summary(row, [], Money(launch.held, row.currency), []),
        detailed=True,
        events=[EventView(as_utc(row.created_at), None, row.status, instances.CREATED)],
        weights=_weights(row, []),
        volumes=launch.volumes,
    )


def topology(session: Session, catalog: Catalog, view: InstanceView) -> Topology:
    """The fabric under a detailed view's cluster (the nodes as the inventory recorded them)."""
    nodes = view.cluster
    specs = fleet.specs_of(session, {n.node for n in nodes})
    placed = [specs[n.node] for n in nodes]
    model = catalog.model_by_id(view.gpu)
    return Topology(
        link=model.in_node_link,
        leaves=sorted({s.ib_leaf for s in placed if s.ib_leaf}),
        spines=sorted({s.ib_spine for s in placed if s.ib_spine}),
        leaf_of={n.node: specs[n.node].ib_leaf for n in nodes},
        expected_busbw=readiness_rules.expected_busbw(model, nodes[0].gpus, placed)
        if nodes
        else None,
    )


def _stages(session: Session, row: InstanceRow) -> list[StageView]:
    return [
        StageView(
            name=s.name,
            started_at=as_utc(s.started_at),
            finished_at=as_utc(s.finished_at) if s.finished_at else None,
            outcome=s.outcome,
            detail=json.loads(s.detail) if s.detail else {},
        )
        for s in readiness.stages_of(session, row)
    ]


def _weights(row: InstanceRow, stages: list[StageView]) -> WeightsView | None:
    if row.weights is None:
        return None
    placed = next((s.detail for s in stages if s.name == "allocated"), {})
    found = placed.get("weights") or {"id": row.weights, "mount": f"/models/{row.weights}"}
    return WeightsView(
        id=found["id"],
        mount=found["mount"],
        local=bool(found.get("local", False)),
        copy_seconds=int(found.get("copy_seconds", 0)),
    )


def nodes_of(
    session: Session, row: InstanceRow, allocations: list[AllocationRow] | None = None
) -> list[str]:
    """The nodes the instance holds GPUs on now (empty when it holds none; a run without GPUs:
    its host). `allocations`: `allocations_of`'s answer, where the caller has it."""
    placed = (InstanceStatus.PROVISIONING.value, InstanceStatus.RUNNING.value)
    if row.no_gpu and row.node_order and row.status in placed:
        return list(json.loads(row.node_order))
    if allocations is None:
        allocations = instances.allocations_of(session, row)
    return sorted({a.node_id for a in allocations})


def cluster_of(
    session: Session, row: InstanceRow, allocations: list[AllocationRow] | None = None
) -> list[ClusterNode]:
    """The instance's nodes as a cluster (`core.cluster`), while it holds any; addresses from
    the backend's connection details (`hosts`), else the node ids. `allocations`:
    `allocations_of`'s answer, where the caller has it."""
    if allocations is None:
        allocations = instances.allocations_of(session, row)
    gpus_by_node: dict[str, list[int]] = {}
    for alloc in allocations:
        gpus_by_node.setdefault(alloc.node_id, []).append(alloc.gpu_index)
    if not gpus_by_node:
        return []
    connection = json.loads(row.connection) if row.connection else {}
    hosts = connection.get("hosts")
    addresses = {str(k): str(v) for k, v in hosts.items()} if isinstance(hosts, dict) else {}
    rails = {n.id: n.ib_rails for n in node_store.get_nodes(session, gpus_by_node)}
    order = json.loads(row.node_order) if row.node_order else []
    return cluster.layout(row.name, gpus_by_node, addresses, rails, order)


def events_of(session: Session, row: InstanceRow) -> list[InstanceEventRow]:
    return instance_store.list_events(session, row.id)
