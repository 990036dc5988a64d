"""Bodies of `GET /api/v1/statements/{month}`. Money as decimal strings with all six decimals,
so figures add up exactly (docs/dev/statements.md says what each one means).

Pure pydantic: the typed client imports these too.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class UsageLineRead(BaseModel):
    instance_id: str
    instance_name: str
    gpu_model: str
    data_centre: str | None
    gpu_count: int
    card_seconds: int = Field(description="GPU-seconds used in the month at this price.")
    rate_per_card_hour: str
    amount: str = Field(description="What these seconds add to the instance's charge.")
    started_at: datetime
    ended_at: datetime
    running: bool = Field(description="Includes usage up to now that is not final yet.")


class StorageLineRead(BaseModel):
    volume_id: str
    volume_name: str
    data_centre: str
    size_gb: int
    gb_seconds: int = Field(description="GB-seconds kept in the month.")
    rate_per_gb_hour: str
    amount: str = Field(description="What this time adds to the volume's charge.")
    started_at: datetime
    ended_at: datetime
    kept: bool = Field(description="Still kept: the line grows until deletion or month end.")


class PlanLineRead(BaseModel):
    instance_id: str
    instance_name: str
    gpu_model: str
    gpu_count: int
    kind: str = Field(description="plan (the 30 days, prepaid) | plan_refund (negative)")
    amount: str
    posted_at: datetime


class BalancesRead(BaseModel):
    cash: str
    credits: str = Field(description="Every credit account, expired ones included until swept.")
    held: str = Field(description="Set aside for instances (holds).")
    total: str


class MovementsRead(BaseModel):
    """Posted in the month, signed by their effect on the balance; `total` = closing − opening."""

    top_ups: str
    credits_granted: dict[str, str] = Field(description="Per credit kind.")
    credits_expired: dict[str, str] = Field(description="Per credit kind (negative).")
    usage_charged: str = Field(description="Negative.")
    plan_charged: str = Field(description="Negative.")
    plan_refunds: str
    storage_charged: str = Field(description="Negative.")
    other: str
    total: str


class StatementRead(BaseModel):
    month: str = Field(examples=["2026-01"])
    currency: str
    period_start: datetime
    period_end: datetime = Field(description="The next month's start, or now while it runs.")
    complete: bool = Field(description="The month is over: its usage lines are final.")
    usage_lines: list[UsageLineRead] = Field(description="Usage in the month (accrued).")
    plan_lines: list[PlanLineRead] = Field(description="Plan charges posted in the month.")
    storage_lines: list[StorageLineRead] = Field(
        default_factory=list, description="Volumes kept in the month (accrued)."
    )
    usage_total: str
    plan_total: str
    storage_total: str
    total: str = Field(description="usage_total + plan_total + storage_total.")
    charged: str = Field(description="Usage, plan and storage charges posted in the month.")
    paid_from: dict[str, str] = Field(
        description="What paid `charged`, per credit kind and cash (holds by what funded them)."
    )
    credits_used: str
    cash_used: str
    paid_by_grants: str = Field(
        description="Usage of your instances that team grants paid, posted in the month (not in "
        "`charged`)."
    )
    grant_card_hours: str = Field(description="The card time those grants gave, in card-hours.")
    opening: BalancesRead
    closing: BalancesRead
    movements: MovementsRead
    generated_at: datetime
