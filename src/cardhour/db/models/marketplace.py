"""The AI app marketplace: apps, their versions, paid calls and developers' payouts.

The same `Base` as `cardhour.db.models` (imported by `cardhour.db.migrate` and the Alembic env,
so the schema check sees these tables). Money is BigInteger micro-units.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from cardhour.db.models.base import TS, Base


class AppRow(Base):
    """An app in the marketplace; its listing fields come from the current version's manifest."""

    __tablename__ = "apps"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    slug: Mapped[str] = mapped_column(String(48), unique=True)
    developer_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    status: Mapped[str] = mapped_column(String(16))  # core.apps.AppStatus
    status_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    current_version: Mapped[int] = mapped_column(Integer)  # the latest upload (or rollback)
    # the approved version callers get; None until the first approval and after a delisting
    live_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(TS)
    updated_at: Mapped[datetime] = mapped_column(TS)


class AppVersionRow(Base):
    """One uploaded version: the manifest as validated, and where its code was stored."""

    __tablename__ = "app_versions"
    __table_args__ = (UniqueConstraint("app_id", "version", name="uq_app_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    app_id: Mapped[str] = mapped_column(ForeignKey("apps.id"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    manifest: Mapped[str] = mapped_column(Text)  # JSON, as `core.apps.AppManifest` dumps it
    price_micros: Mapped[int] = mapped_column(BigInteger)
    code_sha256: Mapped[str] = mapped_column(String(64))  # also its file: <app id>/<sha256>.zip
    created_at: Mapped[datetime] = mapped_column(TS)
    approved_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)


class AppCallRow(Base):
    """One paid call, keyed by the caller's call id: charged once however often it is sent.
    `status`: ok (charged, split), refunded (split reversed); failed calls are not recorded.
    The gateway records a call with `settled_at` empty; the settlement pass posts its charge and
    split to the ledger and sets it (`services.app_earnings.settle`)."""

    __tablename__ = "app_calls"
    __table_args__ = (
        UniqueConstraint("caller_id", "call_key", name="uq_app_call_key"),
        Index("ix_app_calls_maturing", "matured_at", "matures_at"),
        Index("ix_app_calls_app_at", "app_id", "at"),
        Index("ix_app_calls_unsettled", "settled_at", "caller_id"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    call_key: Mapped[str] = mapped_column(String(128))  # the caller's idempotency key
    app_id: Mapped[str] = mapped_column(ForeignKey("apps.id"))
    version: Mapped[int] = mapped_column(Integer)
    caller_id: Mapped[str] = mapped_column(ForeignKey("users.id"))
    developer_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    status: Mapped[str] = mapped_column(String(16))
    price_micros: Mapped[int] = mapped_column(BigInteger)
    developer_micros: Mapped[int] = mapped_column(BigInteger)
    platform_micros: Mapped[int] = mapped_column(BigInteger)
    duration_ms: Mapped[int] = mapped_column(Integer, default=0)
    at: Mapped[datetime] = mapped_column(TS)
    matures_at: Mapped[datetime] = mapped_column(TS)  # the developer's share is available then
    matured_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    refunded_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    settled_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)  # posted to the ledger


class PayoutRow(Base):
    """A developer's request to be paid their available earnings; an admin marks it paid."""

    __tablename__ = "app_payouts"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    developer_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    amount_micros: Mapped[int] = mapped_column(BigInteger)
    currency: Mapped[str] = mapped_column(String(8))
    status: Mapped[str] = mapped_column(String(16))  # requested | paid
    requested_at: Mapped[datetime] = mapped_column(TS)
    paid_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    reference: Mapped[str | None] = mapped_column(String(128), nullable=True)  # the bank's


class AppReplicaRow(Base):
    """Capacity one app replica holds on the fleet: `milli` of each GPU in `gpus` (a fraction of
    one, or whole ones), CPU and memory on one node, placed by the scheduler like a container.
    `runtime_id` is the gateway process that runs it; it refreshes `seen_at`, and a row not seen
    for a while (its process died) is released by any apps reconciler."""

    __tablename__ = "app_replicas"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    app_key: Mapped[str] = mapped_column(String(64))  # "<app id>:<version>"
    node_id: Mapped[str] = mapped_column(ForeignKey("nodes.id"), index=True)
    gpus: Mapped[str] = mapped_column(String(64), default="")  # GPU indices, "0,1"; "" none
    milli: Mapped[int] = mapped_column(Integer, default=0)  # per GPU in `gpus`
    cpu_milli: Mapped[int] = mapped_column(Integer)
    memory_mib: Mapped[int] = mapped_column(Integer)
    runtime_id: Mapped[str] = mapped_column(String(32), index=True)
    created_at: Mapped[datetime] = mapped_column(TS)
    seen_at: Mapped[datetime] = mapped_column(TS, index=True)

    @property
    def app_id(self) -> str:
        return self.app_key.split(":")[0]

    @property
    def version(self) -> int:
        return int(self.app_key.rsplit(":", 1)[1])

    @property
    def gpu_indices(self) -> tuple[int, ...]:
        return gpu_indices(self.gpus)


def gpu_indices(gpus: str) -> tuple[int, ...]:
    """`AppReplicaRow.gpus` ("0,1", "" for none) as indices."""
    return tuple(int(g) for g in gpus.split(",") if g)
