"""Operator side of sponsorship proposals: list, assign reviewers, decide (admin role)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from cardhour.api import schemas
from cardhour.api.convert import grants as convert
from cardhour.api.deps import Ctx, get_ctx
from cardhour.api.schemas.grants import (
    DecisionCreate,
    DecisionRead,
    ProposalRead,
    ReviewersCreate,
)
from cardhour.services.grants import proposals
from cardhour.services.grants import reviews as proposal_reviews

router = APIRouter(prefix="/admin/proposals", tags=["admin", "proposals"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    403: {"model": schemas.ErrorRead, "description": "`forbidden`, `conflict_of_interest`"},
    404: {"model": schemas.ErrorRead, "description": "no such proposal"},
    409: {
        "model": schemas.ErrorRead,
        "description": "`invalid_transition`, `not_enough_reviews`",
    },
    422: {"model": schemas.ErrorRead, "description": "`hours_out_of_range`, `invalid_input`"},
}


@router.get("", response_model=list[ProposalRead], responses=_ERRORS)
def list_proposals(
    status: str | None = Query(None, description="Only proposals in this state."),
    ctx: Ctx = Depends(get_ctx),
) -> list[ProposalRead]:
    """Every proposal (drafts included), with reviewers and reviews."""
    with ctx.user_tx() as (session, user):
        return [
            convert.proposal(proposals.view(session, row, user, ctx.now))
            for row in proposal_reviews.list_all(session, user, status)
        ]


@router.post("/{proposal_id}/reviewers", response_model=ProposalRead, responses=_ERRORS)
def assign_reviewers(
    proposal_id: str, body: ReviewersCreate, ctx: Ctx = Depends(get_ctx)
) -> ProposalRead:
    """Assign reviewers (users with the reviewer role, not on the team); they are notified."""
    with ctx.user_tx() as (session, user):
        row = proposal_reviews.assign(session, user, proposal_id, body.reviewers, ctx.now)
        return convert.proposal(proposals.view(session, row, user, ctx.now))


@router.post("/{proposal_id}/decision", response_model=DecisionRead, responses=_ERRORS)
def decide(proposal_id: str, body: DecisionCreate, ctx: Ctx = Depends(get_ctx)) -> DecisionRead:
    """Approve (issues the grant in the same transaction), reject or ask for changes. Needs two
    reviews of the current round; the team is notified."""
    with ctx.user_tx() as (session, user):
        done = proposal_reviews.decide(
            session,
            ctx.platform.catalog,
            user,
            proposal_id,
            body.decision,
            ctx.now,
            body.card_hours,
            body.gpu_models,
            body.reason,
        )
        return DecisionRead(
            proposal=convert.proposal(proposals.view(session, done.proposal, user, ctx.now)),
            grant=convert.grant(done.grant) if done.grant is not None else None,
        )
