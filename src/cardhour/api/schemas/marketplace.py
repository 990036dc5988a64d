"""Request and response bodies of the app marketplace's endpoints."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class AppPublish(BaseModel):
    manifest: str = Field(max_length=100_000, description="The manifest, YAML or JSON.")
    code_b64: str = Field(
        max_length=28_000_000, description="The package: a zip archive, base64-encoded."
    )


class AppRead(BaseModel):
    slug: str
    name: str
    category: str
    description: str
    price_per_call: str
    currency: str
    status: str
    status_reason: str | None = None
    version: int
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    resources: dict[str, Any]
    scaling: dict[str, Any]
    replicas: int = Field(description="Replicas running now.")
    updated_at: datetime


class AppDecision(BaseModel):
    reason: str | None = Field(default=None, max_length=2000)


class AppRollback(BaseModel):
    version: int = Field(ge=1)


class InvokeRead(BaseModel):
    call_id: str
    output: Any
    price: str
    currency: str
    duration_ms: int


class EarningsRead(BaseModel):
    currency: str
    calls: int
    refunded: int
    gross: str
    developer_share: str
    pending: str = Field(description="Shares of calls younger than 7 days.")
    available: str = Field(description="Ready to be paid out.")
    in_payout: str
    paid: str


class PayoutCreate(BaseModel):
    amount: str | None = Field(default=None, description="Omit for everything available.")


class PayoutRead(BaseModel):
    id: str
    amount: str
    currency: str
    status: str
    requested_at: datetime
    paid_at: datetime | None
    reference: str | None


class PayoutPaid(BaseModel):
    reference: str | None = Field(default=None, max_length=128)


class CallRead(BaseModel):
    id: str
    status: str
    price: str
    developer_share: str
    at: datetime
    refunded_at: datetime | None
