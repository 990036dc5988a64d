"""Tables as SQLAlchemy 2 rows. Money columns are BigInteger micro-units; never floats."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

TS = DateTime(timezone=True)


class Base(DeclarativeBase):
    pass


class UserRow(Base):
    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    password_hash: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(20), default="user")
    created_at: Mapped[datetime] = mapped_column(TS)
    # set while the balance cannot cover the next minute of running instances (auto-stop warning)
    low_balance_since: Mapped[datetime | None] = mapped_column(TS, nullable=True)


class SshKeyRow(Base):
    """An SSH public key of an account (never a private one), injected into its instances."""

    __tablename__ = "ssh_keys"
    __table_args__ = (
        UniqueConstraint("owner_id", "fingerprint", name="uq_ssh_keys_owner_fingerprint"),
        UniqueConstraint("owner_id", "name", name="uq_ssh_keys_owner_name"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(String(64))
    key_type: Mapped[str] = mapped_column(String(64))
    bits: Mapped[int] = mapped_column(Integer)
    public_key: Mapped[str] = mapped_column(Text)  # one authorized_keys line
    fingerprint: Mapped[str] = mapped_column(String(64))  # SHA256:… as ssh-keygen -l prints it
    created_at: Mapped[datetime] = mapped_column(TS)


class ApiKeyRow(Base):
    """An API key or a console session. Only the SHA-256 of the secret is stored."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    kind: Mapped[str] = mapped_column(String(16))  # "api" | "session"
    name: Mapped[str] = mapped_column(String(100))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(TS)
    expires_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)


class LedgerAccountRow(Base):
    """One ledger account. Balances are cached sums of posted transfers (verified elsewhere)."""

    __tablename__ = "ledger_accounts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String(100), unique=True)  # "user:<id>:cash"
    owner_id: Mapped[str | None] = mapped_column(ForeignKey("users.id"), nullable=True, index=True)
    kind: Mapped[str] = mapped_column(String(32))
    currency: Mapped[str] = mapped_column(String(3))
    debits_posted: Mapped[int] = mapped_column(BigInteger, default=0)
    credits_posted: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    # credit accounts: unusable from `expires_at` (the rest is swept back); `gpu_models` is a
    # comma-separated list of the models it may pay for (None: any); lower `priority` spends first
    expires_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    gpu_models: Mapped[str | None] = mapped_column(String(200), nullable=True)
    priority: Mapped[int] = mapped_column(Integer, default=100, server_default="100")
    # hold accounts: the instance whose hold this is
    instance_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    # grant-hours accounts: not usable before this (None: from the start)
    valid_from: Mapped[datetime | None] = mapped_column(TS, nullable=True)


class LedgerTransferRow(Base):
    """An immutable transfer; its id is the idempotency key."""

    __tablename__ = "ledger_transfers"
    __table_args__ = (
        CheckConstraint("amount > 0", name="ck_transfer_amount_positive"),
        CheckConstraint("debit_account_id <> credit_account_id", name="ck_transfer_two_accounts"),
        # an account's transfers over a period (statements, verify); few indexes keep the
        # metering pass's bulk insert cheap
        Index("ix_ledger_transfers_debit_time", "debit_account_id", "created_at"),
        Index("ix_ledger_transfers_credit_time", "credit_account_id", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    debit_account_id: Mapped[int] = mapped_column(ForeignKey("ledger_accounts.id"))
    credit_account_id: Mapped[int] = mapped_column(ForeignKey("ledger_accounts.id"))
    amount: Mapped[int] = mapped_column(BigInteger)
    currency: Mapped[str] = mapped_column(String(3))
    kind: Mapped[str] = mapped_column(String(32))
    ref: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(TS)


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
    image: Mapped[str] = mapped_column(String(64))
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


class UsageSegmentRow(Base):
    """A finished running interval at one price. Segments end at stops, price changes and
    month boundaries (UTC), so a statement is a sum of whole segments."""

    __tablename__ = "usage_segments"
    __table_args__ = (Index("ix_usage_segments_owner_start", "owner_id", "started_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    instance_id: Mapped[str] = mapped_column(ForeignKey("instances.id"), index=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"))
    gpu_model: Mapped[str] = mapped_column(String(32))
    data_centre: Mapped[str | None] = mapped_column(String(32), nullable=True)
    gpu_count: Mapped[int] = mapped_column(Integer)
    price_micros: Mapped[int] = mapped_column(BigInteger)
    currency: Mapped[str] = mapped_column(String(3))
    started_at: Mapped[datetime] = mapped_column(TS)
    ended_at: Mapped[datetime] = mapped_column(TS)
    milli_gpu_seconds: Mapped[int] = mapped_column(BigInteger)
    amount_micros: Mapped[int] = mapped_column(BigInteger)  # what this segment added to the charge


class PriceVersionRow(Base):
    """One version of an on-demand price; it applies to usage from `effective_from` on."""

    __tablename__ = "price_versions"
    __table_args__ = (
        CheckConstraint("on_demand_micros > 0", name="ck_price_positive"),
        Index("ix_price_versions_key", "gpu_model", "data_centre", "effective_from"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    gpu_model: Mapped[str] = mapped_column(String(32))
    data_centre: Mapped[str | None] = mapped_column(String(32), nullable=True)  # None: any
    on_demand_micros: Mapped[int] = mapped_column(BigInteger)  # per card-hour
    currency: Mapped[str] = mapped_column(String(3))
    effective_from: Mapped[datetime] = mapped_column(TS)
    source: Mapped[str] = mapped_column(String(16))  # "fleet_file" | "admin"
    created_at: Mapped[datetime] = mapped_column(TS)
    created_by: Mapped[str | None] = mapped_column(String(32), nullable=True)


class QuoteRow(Base):
    """A price promised to one user until `valid_until`."""

    __tablename__ = "quotes"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    gpu_model: Mapped[str] = mapped_column(String(32))
    data_centre: Mapped[str | None] = mapped_column(String(32), nullable=True)
    count: Mapped[int] = mapped_column(Integer)
    plan: Mapped[str] = mapped_column(String(16))
    price_micros: Mapped[int] = mapped_column(BigInteger)  # per card-hour
    currency: Mapped[str] = mapped_column(String(3))
    created_at: Mapped[datetime] = mapped_column(TS)
    valid_until: Mapped[datetime] = mapped_column(TS)


class IdempotencyKeyRow(Base):
    """The first response to a POST carrying `Idempotency-Key`, replayed for retries."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("user_id", "key", name="uq_idempotency_user_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(32))  # "" for unauthenticated callers
    key: Mapped[str] = mapped_column(String(255))
    method: Mapped[str] = mapped_column(String(8))
    path: Mapped[str] = mapped_column(String(255))
    request_hash: Mapped[str] = mapped_column(String(64))  # SHA-256 of method, path and body
    status_code: Mapped[int] = mapped_column(Integer)
    response_body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(TS, index=True)


class GrantRow(Base):
    """A grant of card-hours to a team: its hours live in the ledger account `account_key`
    (unit `MGS`, milli-GPU-seconds), usable by every member for `gpu_models` in
    [`valid_from`, `expires_at`)."""

    __tablename__ = "grants"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    proposal_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    title: Mapped[str] = mapped_column(String(200))
    account_key: Mapped[str] = mapped_column(String(100), unique=True)
    card_hours: Mapped[int] = mapped_column(Integer)
    gpu_models: Mapped[str] = mapped_column(String(200))  # comma-separated
    valid_from: Mapped[datetime] = mapped_column(TS)
    expires_at: Mapped[datetime] = mapped_column(TS)
    created_at: Mapped[datetime] = mapped_column(TS)


class GrantMemberRow(Base):
    """A member of a grant's team: their instances of the grant's models spend its hours."""

    __tablename__ = "grant_members"

    grant_id: Mapped[str] = mapped_column(ForeignKey("grants.id"), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), primary_key=True, index=True)
