"""Stored responses of idempotent requests."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from cardhour.db.models.base import TS, Base
from cardhour.db.sealing import SealedText


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
    response_body: Mapped[str] = mapped_column(SealedText("idempotency_keys.response_body"))
    created_at: Mapped[datetime] = mapped_column(TS, index=True)
