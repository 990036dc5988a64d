"""Grant usage reports and the operator's grants dashboard. Card-hours are decimal strings
with three places, rounded down; the exact figures are milli-GPU-seconds (3,600,000 a card-hour)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class GrantUsageLineRead(BaseModel):
    key: str = Field(description="The instance id, or the member's user id.")
    name: str = Field(description="The instance name, or the member's email.")
    card_hours: str
    milli_gpu_seconds: int


class GrantReportRead(BaseModel):
    grant_id: str
    proposal_id: str | None
    title: str
    gpu_models: list[str] = Field(description="The only models the grant pays for.")
    valid_from: datetime
    expires_at: datetime = Field(description="Unused hours expire then.")
    status: str = Field(description="upcoming, active or expired.")
    members: list[str] = Field(description="Emails of the team: their usage spends the grant.")
    granted_card_hours: str
    used_card_hours: str
    expired_card_hours: str
    remaining_card_hours: str
    burn_rate_card_hours_per_day: str = Field(
        description="Over the last 7 days (or since the grant began)."
    )
    runs_out_at: datetime | None = Field(
        description="When the hours run out at that rate, if before the expiry."
    )
    used_milli_gpu_seconds: int
    expired_milli_gpu_seconds: int
    remaining_milli_gpu_seconds: int
    by_instance: list[GrantUsageLineRead]
    by_member: list[GrantUsageLineRead]


class GrantDashboardRead(BaseModel):
    grants: int
    active: int
    granted_card_hours: str
    used_card_hours: str
    expired_card_hours: str
    remaining_card_hours: str
    lines: list[GrantReportRead]
