"""The ledger (accounts, transfers), metered usage segments, price versions and
quotes. Money columns are BigInteger micro-units; never floats.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
)
from sqlalchemy.orm import Mapped, mapped_column

from cardhour.db.models.base import TS, Base


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
