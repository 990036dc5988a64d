"""The reviewers' side: assignments, conflicts of interest, scores (role `reviewer`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from cardhour.api import schemas
from cardhour.api.convert import grants as convert
from cardhour.api.deps import Ctx, get_ctx
from cardhour.api.schemas.grants import (
    AssignmentRead,
    ConflictCreate,
    ReviewCreate,
    ReviewerRead,
    ReviewRead,
)
from cardhour.core.clock import as_utc
from cardhour.services.grants import reviews as proposal_reviews

router = APIRouter(prefix="/reviews", tags=["proposals"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    403: {
        "model": schemas.ErrorRead,
        "description": "`forbidden` (no reviewer role), `conflict_of_interest`",
    },
    404: {"model": schemas.ErrorRead, "description": "not assigned to you"},
    409: {"model": schemas.ErrorRead, "description": "`invalid_transition`: not submitted"},
}


@router.get("", response_model=list[AssignmentRead], responses=_ERRORS)
def my_assignments(ctx: Ctx = Depends(get_ctx)) -> list[AssignmentRead]:
    """The proposals assigned to the caller, with their own review of the current round."""
    with ctx.user_tx() as (session, user):
        return [convert.assignment(a, user) for a in proposal_reviews.assignments(session, user)]


@router.post("/{proposal_id}/conflict", response_model=ReviewerRead, responses=_ERRORS)
def declare_conflict(
    proposal_id: str, body: ConflictCreate, ctx: Ctx = Depends(get_ctx)
) -> ReviewerRead:
    """Declare a conflict of interest: the caller can no longer score this proposal, and a score
    already given in this round is removed."""
    with ctx.user_tx() as (session, user):
        a = proposal_reviews.declare_conflict(session, user, proposal_id, body.reason, ctx.now)
        return ReviewerRead(
            email=user.email,
            assigned_at=as_utc(a.assigned_at),
            conflict=True,
            conflict_reason=a.conflict_reason,
        )


@router.post("/{proposal_id}", response_model=ReviewRead, responses=_ERRORS)
def score(proposal_id: str, body: ReviewCreate, ctx: Ctx = Depends(get_ctx)) -> ReviewRead:
    """Score a submitted proposal 1-5 on each criterion, with comments; scoring again in the
    same round replaces the earlier scores."""
    scores = body.model_dump(exclude={"comments"})
    with ctx.user_tx() as (session, user):
        review = proposal_reviews.score(session, user, proposal_id, scores, body.comments, ctx.now)
        return convert.review(review, user)
