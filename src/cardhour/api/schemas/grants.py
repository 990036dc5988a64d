"""Bodies of /api/v1/proposals, /reviews, /admin/proposals and /notifications.

Pure pydantic: the typed client imports these too. Card-hour bounds are checked by the service
(code `hours_out_of_range`), not here, so the error names them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, StrictInt


class ProposalCreate(BaseModel):
    title: str = Field(examples=["Protein folding at scale"])
    abstract: str
    institution: str = Field(examples=["University of Somewhere"])
    card_hours: StrictInt = Field(description="1 to 100,000 card-hours.", examples=[80000])
    gpu_models: list[str] = Field(examples=[["H100"]])
    period_start: datetime
    period_end: datetime
    justification: str = Field(description="Why this much compute.")
    members: list[str] = Field(
        default_factory=list, description="Emails of the other team members (existing accounts)."
    )


class ProposalUpdate(BaseModel):
    """Only the fields sent change; `members` replaces the team (the creator always stays)."""

    title: str | None = None
    abstract: str | None = None
    institution: str | None = None
    card_hours: StrictInt | None = None
    gpu_models: list[str] | None = None
    period_start: datetime | None = None
    period_end: datetime | None = None
    justification: str | None = None
    members: list[str] | None = None


class WithdrawCreate(BaseModel):
    reason: str | None = None


class ProposalEventRead(BaseModel):
    at: datetime
    action: str
    from_status: str | None
    to_status: str
    reason: str | None


class ReviewRead(BaseModel):
    reviewer: str = Field(description="The reviewer's email.")
    round: int
    technical_merit: int
    feasibility: int
    compute_justification: int
    comments: str
    updated_at: datetime


class ReviewerRead(BaseModel):
    email: str
    assigned_at: datetime
    conflict: bool
    conflict_reason: str | None


class DocumentRead(BaseModel):
    bytes: int
    sha256: str


class ProposalRead(BaseModel):
    id: str
    title: str
    abstract: str
    institution: str
    card_hours: int
    gpu_models: list[str]
    period_start: datetime
    period_end: datetime
    justification: str
    status: str = Field(
        description="draft | submitted | changes_requested | withdrawn | approved | rejected"
    )
    round: int = Field(description="Review round: one per submission.")
    members: list[str]
    document: DocumentRead | None
    reviews_count: int = Field(description="Reviews of the current round.")
    decision_reason: str | None
    approved_hours: int | None
    approved_gpu_models: list[str]
    grant_id: str | None
    created_at: datetime
    updated_at: datetime
    submitted_at: datetime | None
    decided_at: datetime | None
    events: list[ProposalEventRead]
    reviewers: list[ReviewerRead] | None = Field(default=None, description="Admins only.")
    reviews: list[ReviewRead] | None = Field(
        default=None, description="Admins: all; an assigned reviewer: their own."
    )
    grant: dict[str, Any] | None = Field(
        default=None, description="Once approved: the grant's usage report."
    )


class ReviewCreate(BaseModel):
    technical_merit: StrictInt = Field(ge=1, le=5)
    feasibility: StrictInt = Field(ge=1, le=5)
    compute_justification: StrictInt = Field(ge=1, le=5)
    comments: str = ""


class ConflictCreate(BaseModel):
    reason: str = Field(examples=["I co-authored with the applicant in 2025"])


class AssignmentRead(BaseModel):
    proposal_id: str
    title: str
    institution: str
    status: str
    round: int
    card_hours: int
    gpu_models: list[str]
    members: list[str]
    assigned_at: datetime
    conflict: bool
    my_review: ReviewRead | None


class ReviewersCreate(BaseModel):
    reviewers: list[str] = Field(description="Emails of users with the reviewer role.")


class DecisionCreate(BaseModel):
    decision: str = Field(description="approve | reject | request_changes")
    card_hours: StrictInt | None = Field(
        default=None, description="approve: at most those requested (default: all)."
    )
    gpu_models: list[str] | None = Field(
        default=None, description="approve: among those requested (default: all)."
    )
    reason: str | None = Field(default=None, description="Needed to reject or ask for changes.")


class GrantRead(BaseModel):
    id: str
    proposal_id: str | None
    card_hours: int
    gpu_models: list[str]
    valid_from: datetime
    expires_at: datetime
    account_key: str


class DecisionRead(BaseModel):
    proposal: ProposalRead
    grant: GrantRead | None


class NotificationRead(BaseModel):
    id: int
    subject: str
    body: str
    created_at: datetime
    sent_at: datetime | None
