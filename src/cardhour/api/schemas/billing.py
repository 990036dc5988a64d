"""Balances, credits, quotes, prices, top-ups and payments. Money as decimal strings.

Pure pydantic: the typed client (`cardhour.client`) imports these too.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field, StrictInt


class CreditRead(BaseModel):
    kind: str = Field(description="trial_credit | sla_credit | grant_credit")
    balance: str
    expires_at: datetime | None
    gpu_models: list[str] = Field(description="Models it may pay for; empty: any.")
    expired: bool


class BalanceRead(BaseModel):
    currency: str
    available: str = Field(description="Cash + unexpired credits, rounded down to 0.01.")
    cash: str = Field(description="May be negative: usage that ran before an auto-stop.")
    trial_credit: str
    credits: list[CreditRead] = Field(description="Spent before cash, in this order.")
    held: str = Field(description="Set aside for instances at launch (one hour, or a plan).")
    committed_per_hour: str = Field(description="One hour of instances running or starting.")
    available_exact: str = Field(description="To the ledger's micro-unit (6 decimals).")
    low_balance_since: datetime | None = Field(
        description="Set while the money cannot cover the next minute: instances stop soon."
    )


class QuoteRead(BaseModel):
    count: int
    currency: str
    price_per_card_hour: str
    monthly_price_per_card_hour: str
    per_hour: str
    per_month_on_demand: str
    per_month_monthly_plan: str


class TopUpCreate(BaseModel):
    email: str = Field(max_length=320, examples=["ada@example.com"])
    amount: str = Field(
        max_length=40,
        description="Positive decimal string, at most 6 decimals and 1,000,000,000.",
        examples=["100.00"],
    )
    reference: str | None = Field(
        default=None,
        description="Your reference (e.g. a bank transfer id); the same reference is credited "
        "once. Generated when absent. 1-100 printable ASCII characters.",
        examples=["bank-2024-0001"],
    )


class TopUpRead(BaseModel):
    user_id: str
    email: str
    amount: str
    currency: str
    reference: str
    transfer_id: str = Field(description="The ledger transfer: `topup:<reference>`.")


class PaymentWebhookRead(BaseModel):
    received: bool = True
    duplicate: bool = Field(default=False, description="Delivered before; nothing moved now.")
    ignored: bool = Field(default=False, description="An event type cardhour does not act on.")


class QuoteCreate(BaseModel):
    gpu: str = Field(examples=["H100"])
    count: StrictInt = Field(default=1, examples=[8])
    plan: str = Field(default="on_demand", description="on_demand or monthly.")


class QuoteCreated(BaseModel):
    id: str
    gpu: str
    count: int
    plan: str
    currency: str
    price_per_card_hour: str = Field(description="The most any data centre with it charges now.")
    per_hour: str
    plan_total: str | None = Field(description="Monthly: 30 days × 24 h × count, charged once.")
    valid_until: datetime


class PriceSet(BaseModel):
    gpu: str = Field(examples=["H100"])
    price: str = Field(description="On-demand CNY per card-hour.", examples=["2.10"])
    data_centre: str | None = Field(default=None, description="Default: every one with it.")
    effective_from: datetime | None = Field(default=None, description="Default: now.")


class PriceRead(BaseModel):
    gpu: str
    data_centre: str
    currency: str
    on_demand: str
    monthly: str
    effective_from: datetime
    current: bool = Field(description="In force now; false: a scheduled change.")


class CreditCreate(BaseModel):
    email: str
    kind: str = Field(description="sla_credit or grant_credit.")
    amount: str = Field(examples=["50.00"])
    expires_at: datetime | None = None
    gpu_models: list[str] = Field(default=[], description="Models it may pay for; empty: any.")
    reference: str | None = Field(default=None, description="Idempotency: granted once.")


class CreditCreated(BaseModel):
    user_id: str
    email: str
    kind: str
    amount: str
    currency: str
    expires_at: datetime | None
    gpu_models: list[str]
    reference: str
