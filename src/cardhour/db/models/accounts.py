"""Users, their API keys and SSH keys, the notification outbox."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from cardhour.db.models.base import TS, Base


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


class NotificationRow(Base):
    """The outbox: a mailer sends rows with `sent_at` NULL and sets it."""

    __tablename__ = "notifications"
    __table_args__ = (
        Index("ix_notifications_user_time", "user_id", "created_at"),
        # what the mailer drains
        Index(
            "ix_notifications_unsent",
            "id",
            sqlite_where=text("sent_at IS NULL"),
            postgresql_where=text("sent_at IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"))
    subject: Mapped[str] = mapped_column(String(300))
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(TS)
    sent_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)


class AuthThrottleRow(Base):
    """Failed sign-ins and sign-ups counted per key (`account:<email>`, `address:<client>`)
    in a window, and the lock they earned (`services.accounts.throttle`)."""

    __tablename__ = "auth_throttles"

    key: Mapped[str] = mapped_column(String(400), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    window_start: Mapped[datetime] = mapped_column(TS)
    locked_until: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    strikes: Mapped[int] = mapped_column(Integer, default=0)  # locks so far: each one longer
    updated_at: Mapped[datetime] = mapped_column(TS, index=True)


class AuthEventRow(Base):
    """What an operator sees of attacks on accounts: each lock a throttle put on."""

    __tablename__ = "auth_events"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    at: Mapped[datetime] = mapped_column(TS, index=True)
    kind: Mapped[str] = mapped_column(String(32))  # "locked"
    key: Mapped[str] = mapped_column(String(400))
    detail: Mapped[str] = mapped_column(Text)
