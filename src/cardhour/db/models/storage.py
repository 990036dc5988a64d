"""Persistent volumes (`services.storage`, docs/dev/storage.md)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from cardhour.db.models.base import TS, Base


class VolumeRow(Base):
    """One volume. `host`: where its data is (None until first attached; with a data centre's
    shared storage, the host that attached it last, which removes it on delete). Attached to at
    most one instance (`instance_id`, mounted at `mount_path`). Billed from `created_at` to
    `deleted_at` (or now): `billed_micros` charged so far, up to `billed_until`."""

    __tablename__ = "volumes"
    __table_args__ = (
        # a name is unique among an owner's volumes that are not deleted
        Index(
            "uq_volumes_owner_live_name",
            "owner_id",
            "name",
            unique=True,
            sqlite_where=text("state <> 'deleted' AND kind = 'volume'"),
            postgresql_where=text("state <> 'deleted' AND kind = 'volume'"),
        ),
        Index("ix_volumes_instance", "instance_id"),
        Index("ix_volumes_state", "state"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    # volume (the renter's) | disk (a stopped instance's container disk, kept and billed as
    # storage until its start or terminate: `services.storage.disks`)
    kind: Mapped[str] = mapped_column(String(16), default="volume", server_default="volume")
    name: Mapped[str] = mapped_column(String(64))
    data_centre: Mapped[str] = mapped_column(String(32))
    size_gb: Mapped[int] = mapped_column(Integer)
    # available | attached | deleting | deleted; a disk: kept | deleted (`core.storage.volumes`)
    state: Mapped[str] = mapped_column(String(16))
    # the data centre's shared storage path it lives on; None: a host's own volume folder
    store: Mapped[str | None] = mapped_column(Text, nullable=True)
    host: Mapped[str | None] = mapped_column(String(64), nullable=True)
    instance_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    mount_path: Mapped[str | None] = mapped_column(String(255), nullable=True)
    # set once a container ran with it: its data exists and is never made afresh
    formatted_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    price_micros: Mapped[int] = mapped_column(BigInteger)  # per GB-hour, fixed at creation
    currency: Mapped[str] = mapped_column(String(3))
    billed_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    billed_until: Mapped[datetime] = mapped_column(TS)
    created_at: Mapped[datetime] = mapped_column(TS)
    delete_requested_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    deleted_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    # its owner's money ran out then: kept for the retention period, then deleted
    overdue_since: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    overdue_warned_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)


class VolumeEventRow(Base):
    """What happened to a volume, for its owner: created, attached, detached, overdue, kept,
    delete requested, deleted (and why)."""

    __tablename__ = "volume_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    volume_id: Mapped[str] = mapped_column(ForeignKey("volumes.id"), index=True)
    at: Mapped[datetime] = mapped_column(TS)
    kind: Mapped[str] = mapped_column(String(32))
    message: Mapped[str] = mapped_column(Text)
