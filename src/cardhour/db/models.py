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


class LedgerTransferRow(Base):
    """An immutable transfer; its id is the idempotency key."""

    __tablename__ = "ledger_transfers"
    __table_args__ = (
        CheckConstraint("amount > 0", name="ck_transfer_amount_positive"),
        CheckConstraint("debit_account_id <> credit_account_id", name="ck_transfer_two_accounts"),
    )

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    debit_account_id: Mapped[int] = mapped_column(ForeignKey("ledger_accounts.id"), index=True)
    credit_account_id: Mapped[int] = mapped_column(ForeignKey("ledger_accounts.id"), index=True)
    amount: Mapped[int] = mapped_column(BigInteger)
    currency: Mapped[str] = mapped_column(String(3))
    kind: Mapped[str] = mapped_column(String(32))
    ref: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
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
    price_micros: Mapped[int] = mapped_column(BigInteger)  # per card-hour, fixed at placement
    currency: Mapped[str] = mapped_column(String(3))
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    external_name: Mapped[str | None] = mapped_column(String(64), nullable=True)
    connection: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON
    running_since: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    usage_closed: Mapped[int] = mapped_column(BigInteger, default=0)  # milli-GPU-seconds
    billed_micros: Mapped[int] = mapped_column(BigInteger, default=0)  # charged in all
    billed_closed_micros: Mapped[int] = mapped_column(BigInteger, default=0)  # finished segments
    charged_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    lease_token: Mapped[str | None] = mapped_column(String(32), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    created_at: Mapped[datetime] = mapped_column(TS)
    updated_at: Mapped[datetime] = mapped_column(TS)


class InstanceEventRow(Base):
    __tablename__ = "instance_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    instance_id: Mapped[str] = mapped_column(ForeignKey("instances.id"), index=True)
    at: Mapped[datetime] = mapped_column(TS)
    from_status: Mapped[str | None] = mapped_column(String(16), nullable=True)
    to_status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
