"""Proposal rows and views → response schemas."""

from __future__ import annotations

from typing import Any

from cardhour.api.schemas.grants import (
    AssignmentRead,
    DocumentRead,
    GrantRead,
    NotificationRead,
    ProposalEventRead,
    ProposalRead,
    ReviewerRead,
    ReviewRead,
)
from cardhour.core.clock import as_utc
from cardhour.db.models import NotificationRow, ProposalReviewRow, UserRow
from cardhour.services.grants.proposals import ProposalView, models_of
from cardhour.services.grants.reviews import Assignment


def proposal(v: ProposalView) -> ProposalRead:
    row = v.row
    document = (
        DocumentRead(bytes=row.document_bytes, sha256=row.document_sha256 or "")
        if row.document_bytes is not None
        else None
    )
    return ProposalRead(
        id=row.id,
        title=row.title,
        abstract=row.abstract,
        institution=row.institution,
        card_hours=row.card_hours,
        gpu_models=models_of(row.gpu_models),
        period_start=as_utc(row.period_start),
        period_end=as_utc(row.period_end),
        justification=row.justification,
        status=row.status,
        round=row.round,
        members=v.members,
        document=document,
        reviews_count=v.reviews_count,
        decision_reason=row.decision_reason,
        approved_hours=row.approved_hours,
        approved_gpu_models=models_of(row.approved_gpu_models),
        grant_id=row.grant_id,
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
        submitted_at=as_utc(row.submitted_at) if row.submitted_at else None,
        decided_at=as_utc(row.decided_at) if row.decided_at else None,
        events=[
            ProposalEventRead(
                at=as_utc(e.at),
                action=e.action,
                from_status=e.from_status,
                to_status=e.to_status,
                reason=e.reason,
            )
            for e in v.events
        ],
        reviewers=None
        if v.reviewers is None
        else [
            ReviewerRead(
                email=u.email,
                assigned_at=as_utc(a.assigned_at),
                conflict=a.conflict_at is not None,
                conflict_reason=a.conflict_reason,
            )
            for a, u in v.reviewers
        ],
        reviews=None if v.reviews is None else [review(r, u) for r, u in v.reviews],
        grant=v.grant,
    )


def review(r: ProposalReviewRow, reviewer: UserRow) -> ReviewRead:
    return ReviewRead(
        reviewer=reviewer.email,
        round=r.round,
        technical_merit=r.technical_merit,
        feasibility=r.feasibility,
        compute_justification=r.compute_justification,
        comments=r.comments,
        updated_at=as_utc(r.updated_at),
    )


def assignment(a: Assignment, reviewer: UserRow) -> AssignmentRead:
    p = a.proposal
    return AssignmentRead(
        proposal_id=p.id,
        title=p.title,
        institution=p.institution,
        status=p.status,
        round=p.round,
        card_hours=p.card_hours,
        gpu_models=models_of(p.gpu_models),
        members=a.members,
        assigned_at=as_utc(a.assignment.assigned_at),
        conflict=a.assignment.conflict_at is not None,
        my_review=review(a.review, reviewer) if a.review is not None else None,
    )


def grant(row: Any) -> GrantRead:
    """The grants-table row that `grant_hours.issue` returns."""
    return GrantRead(
        id=row.id,
        proposal_id=row.proposal_id,
        card_hours=row.card_hours,
        gpu_models=models_of(row.gpu_models),
        valid_from=as_utc(row.valid_from),
        expires_at=as_utc(row.expires_at),
        account_key=row.account_key,
    )


def notification(row: NotificationRow) -> NotificationRead:
    return NotificationRead(
        id=row.id,
        subject=row.subject,
        body=row.body,
        created_at=as_utc(row.created_at),
        sent_at=as_utc(row.sent_at) if row.sent_at else None,
    )
