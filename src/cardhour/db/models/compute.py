"""Nodes, their allocations, instances with their stages and events."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from cardhour.db.models.base import TS, Base
from cardhour.db.sealing import SealedText


class NodeRow(Base):
    __tablename__ = "nodes"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    data_centre: Mapped[str] = mapped_column(String(32), index=True)
    gpu_model: Mapped[str] = mapped_column(String(32), index=True)
    gpu_count: Mapped[int] = mapped_column(Integer)
    cpus: Mapped[int] = mapped_column(Integer)
    memory_gb: Mapped[int] = mapped_column(Integer)
    ib_leaf: Mapped[str | None] = mapped_column(String(64), nullable=True)
    ib_spine: Mapped[str | None] = mapped_column(String(64), nullable=True)
    ib_rails: Mapped[int] = mapped_column(Integer, default=0)
    ib_gbps_per_rail: Mapped[int] = mapped_column(Integer, default=0)
    schedulable: Mapped[bool] = mapped_column(default=True)
    allocation_version: Mapped[int] = mapped_column(Integer, default=0)
    # set when the node failed a readiness check: unschedulable until an operator resumes it
    drained_reason: Mapped[str | None] = mapped_column(Text, nullable=True)


class FleetInventoryRow(Base):
    """One row (id 1): the fleet inventory's version, a fresh random id written in the same
    transaction as any node added, changed, removed, drained or resumed
    (`store.compute.nodes.inventory_changed`), never by allocations. A process caching what it
    derived from the inventory (the launch's capacity summary) checks it is current with one
    primary-key read; a copy of the database (same nodes) keeps the same version."""

    __tablename__ = "fleet_inventory"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[str] = mapped_column(String(32))


class AllocationRow(Base):
    """One GPU held by one instance. The unique constraint makes double allocation impossible."""

    __tablename__ = "allocations"
    __table_args__ = (UniqueConstraint("node_id", "gpu_index", name="uq_allocation_gpu"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    instance_id: Mapped[str] = mapped_column(ForeignKey("instances.id"), index=True)
    node_id: Mapped[str] = mapped_column(ForeignKey("nodes.id"))
    gpu_index: Mapped[int] = mapped_column(Integer)


class InstanceRow(Base):
    __tablename__ = "instances"
    __table_args__ = (
        Index("ix_instances_status", "status"),
        Index("ix_instances_disk_host", "disk_host"),
        # a name is unique among an owner's instances that are not terminated
        Index(
            "uq_instances_owner_live_name",
            "owner_id",
            "name",
            unique=True,
            sqlite_where=text("status <> 'terminated'"),
            postgresql_where=text("status <> 'terminated'"),
        ),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(String(64))
    gpu_model: Mapped[str] = mapped_column(String(32))
    gpu_count: Mapped[int] = mapped_column(Integer)
    # a catalog image's id, or the renter's own OCI reference (fully qualified)
    image: Mapped[str] = mapped_column(String(255))
    # the renter's workload: the command (`sh -c`; None: the container idles), environment
    # variables (JSON object, in the order given) and container ports to publish (JSON list)
    command: Mapped[str | None] = mapped_column(Text, nullable=True)
    env: Mapped[str | None] = mapped_column(SealedText("instances.env"), nullable=True)
    ports: Mapped[str | None] = mapped_column(Text, nullable=True)
    ssh_key: Mapped[str | None] = mapped_column(Text, nullable=True)
    plan: Mapped[str] = mapped_column(String(16))
    # the operator may live-migrate it to defragment the fleet (moves are only proposed so far)
    movable: Mapped[bool] = mapped_column(default=False, server_default=false())
    status: Mapped[str] = mapped_column(String(16))
    status_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    desired: Mapped[str] = mapped_column(String(16))  # "running" | "stopped" | "terminated"
    data_centre: Mapped[str | None] = mapped_column(String(32), nullable=True)
    price_micros: Mapped[int] = mapped_column(BigInteger)  # per card-hour, of the open segment
    # a valid quote's price at launch: placement never charges more than it
    quoted_price_micros: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    quote_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # monthly plan: prepaid until `plan_until`; then "on_demand" (billed per second) or "stop"
    plan_until: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    plan_at_expiry: Mapped[str | None] = mapped_column(String(16), nullable=True)
    currency: Mapped[str] = mapped_column(String(3))
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    external_name: Mapped[str | None] = mapped_column(String(64), nullable=True)
    connection: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON
    running_since: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    usage_closed: Mapped[int] = mapped_column(BigInteger, default=0)  # milli-GPU-seconds
    billed_micros: Mapped[int] = mapped_column(BigInteger, default=0)  # usage charged in all
    # exact cost of the finished segments = billed_closed_micros + closed_frac / 3,600,000 µ
    billed_closed_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    closed_frac: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    charged_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    # the user's open request to run it (launch or start), until it is ready or given up:
    # the SLA's clock (`services.sla`); a node replaced by the platform does not restart it
    requested_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    # the SLA's window in force at launch (catalog `sla_ready_within_seconds`), and when the
    # owner was told the current request missed it
    sla_seconds: Mapped[int] = mapped_column(Integer, default=900, server_default="900")
    sla_warned_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    # the nodes in rank order (JSON list) as placed; a replacement node takes its rank
    node_order: Mapped[str | None] = mapped_column(Text, nullable=True)
    # model weights asked for at launch (catalog `model_weights` id), mounted at /models/<id>
    weights: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # bare metal: whole nodes held exclusively (no other workload shares them), never containers
    bare_metal: Mapped[bool] = mapped_column(default=False, server_default=false())
    # where it must be placed (its volumes' data centre, and host for a host's own volume)
    placement_dc: Mapped[str | None] = mapped_column(String(32), nullable=True)
    placement_host: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # the host its container disk was kept on by a stop (a start is placed there); cleared
    # once a terminated instance's disk was let go
    disk_host: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # started without GPUs (CPU only, at the storage offer's price per hour) to reach its disk
    no_gpu: Mapped[bool] = mapped_column(default=False, server_default=false())
    # a start that moves its kept disk: the host it is copied from (to `placement_host`)
    move_from: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_token: Mapped[str | None] = mapped_column(String(32), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    created_at: Mapped[datetime] = mapped_column(TS)
    updated_at: Mapped[datetime] = mapped_column(TS)


class InstanceStageRow(Base):
    """One readiness stage of one placement (`attempt`) of an instance (`core.readiness`)."""

    __tablename__ = "instance_stages"
    __table_args__ = (UniqueConstraint("instance_id", "attempt", "name", name="uq_instance_stage"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    instance_id: Mapped[str] = mapped_column(ForeignKey("instances.id"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(32))
    started_at: Mapped[datetime] = mapped_column(TS)
    finished_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    outcome: Mapped[str | None] = mapped_column(String(16), nullable=True)  # ok|failed|skipped
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON


class InstanceEventRow(Base):
    __tablename__ = "instance_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    instance_id: Mapped[str] = mapped_column(ForeignKey("instances.id"), index=True)
    at: Mapped[datetime] = mapped_column(TS)
    from_status: Mapped[str | None] = mapped_column(String(16), nullable=True)
    to_status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
