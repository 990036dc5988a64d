"""The applicant team's side of sponsorship proposals, and the caller's notifications.

The PDF is uploaded as the raw request body with `Content-Type: application/pdf`
(`PUT /proposals/{id}/document`); no multipart.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request, Response

from cardhour.api import schemas
from cardhour.api.convert import grants as convert
from cardhour.api.deps import Ctx, get_ctx
from cardhour.api.schemas.grants import (
    NotificationRead,
    ProposalCreate,
    ProposalRead,
    ProposalUpdate,
    WithdrawCreate,
)
from cardhour.core import proposals as rules
from cardhour.services.accounts import notifications
from cardhour.services.grants import proposals
from cardhour.services.grants.proposals import ProposalInput

router = APIRouter(tags=["proposals"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": schemas.ErrorRead, "description": "no such proposal on your team"},
    409: {"model": schemas.ErrorRead, "description": "`not_editable`, `invalid_transition`"},
    422: {"model": schemas.ErrorRead, "description": "`hours_out_of_range`, `invalid_input`"},
}
_PDF_ERRORS: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    400: {"model": schemas.ErrorRead, "description": "`invalid_document`: not a PDF"},
    413: {"model": schemas.ErrorRead, "description": "`document_too_large`: over 5 MiB"},
}


async def pdf_body(request: Request) -> bytes:
    """The request body, read up to one byte over the limit (the service refuses it then)."""
    data = bytearray()
    async for chunk in request.stream():
        data.extend(chunk)
        if len(data) > rules.MAX_DOCUMENT_BYTES:
            break
    return bytes(data)


def _input(body: ProposalCreate | ProposalUpdate) -> ProposalInput:
    return ProposalInput(**body.model_dump(exclude_unset=isinstance(body, ProposalUpdate)))


@router.post("/proposals", response_model=ProposalRead, status_code=201, responses=_ERRORS)
def create_proposal(body: ProposalCreate, ctx: Ctx = Depends(get_ctx)) -> ProposalRead:
    """A new draft; the caller and `members` are its team. Drafts are seen by the team only."""
    with ctx.user_tx() as (session, user):
        row = proposals.create(session, ctx.platform.catalog, user, _input(body), ctx.now)
        return convert.proposal(proposals.view(session, row, user, ctx.now))


@router.get("/proposals", response_model=list[ProposalRead])
def my_proposals(ctx: Ctx = Depends(get_ctx)) -> list[ProposalRead]:
    """The proposals whose team the caller is on."""
    with ctx.user_tx() as (session, user):
        return [
            convert.proposal(proposals.view(session, row, user, ctx.now))
            for row in proposals.mine(session, user)
        ]


@router.get("/proposals/{proposal_id}", response_model=ProposalRead, responses=_ERRORS)
def show_proposal(proposal_id: str, ctx: Ctx = Depends(get_ctx)) -> ProposalRead:
    """One proposal, for its team, its assigned reviewers and admins (404 for anyone else), with
    its events and, once approved, the grant's usage."""
    with ctx.user_tx() as (session, user):
        row = proposals.readable(session, proposal_id, user)
        return convert.proposal(proposals.view(session, row, user, ctx.now))


@router.patch("/proposals/{proposal_id}", response_model=ProposalRead, responses=_ERRORS)
def edit_proposal(
    proposal_id: str, body: ProposalUpdate, ctx: Ctx = Depends(get_ctx)
) -> ProposalRead:
    """Change the fields sent. Only while draft, changes_requested or withdrawn (409
    `not_editable` once submitted: withdraw it first)."""
    with ctx.user_tx() as (session, user):
        row = proposals.edit(
            session, ctx.platform.catalog, user, proposal_id, _input(body), ctx.now
        )
        return convert.proposal(proposals.view(session, row, user, ctx.now))


@router.put(
    "/proposals/{proposal_id}/document",
    response_model=ProposalRead,
    responses=_PDF_ERRORS,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {rules.PDF_CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
def upload_document(
    proposal_id: str,
    request: Request,
    data: bytes = Depends(pdf_body),
    ctx: Ctx = Depends(get_ctx),
) -> ProposalRead:
    """Attach the PDF (raw body, `Content-Type: application/pdf`, at most 5 MiB, starting
    `%PDF-`), replacing any earlier one. Only while the proposal is editable."""
    with ctx.user_tx() as (session, user):
        row = proposals.attach_document(
            session,
            ctx.platform.settings.data_dir,
            user,
            proposal_id,
            data,
            request.headers.get("content-type"),
            ctx.now,
        )
        return convert.proposal(proposals.view(session, row, user, ctx.now))


@router.get(
    "/proposals/{proposal_id}/document",
    response_class=Response,
    responses={200: {"content": {rules.PDF_CONTENT_TYPE: {}}}, **_ERRORS},
)
def download_document(proposal_id: str, ctx: Ctx = Depends(get_ctx)) -> Response:
    """The PDF, for whoever may read the proposal."""
    with ctx.user_tx() as (session, user):
        data = proposals.read_document(session, ctx.platform.settings.data_dir, user, proposal_id)
    return Response(data, media_type=rules.PDF_CONTENT_TYPE)


@router.post("/proposals/{proposal_id}/submit", response_model=ProposalRead, responses=_ERRORS)
def submit_proposal(proposal_id: str, ctx: Ctx = Depends(get_ctx)) -> ProposalRead:
    """Send it for review: it is frozen and a new review round starts; the team is notified."""
    with ctx.user_tx() as (session, user):
        row = proposals.submit(session, user, proposal_id, ctx.now)
        return convert.proposal(proposals.view(session, row, user, ctx.now))


@router.post("/proposals/{proposal_id}/withdraw", response_model=ProposalRead, responses=_ERRORS)
def withdraw_proposal(
    proposal_id: str, body: WithdrawCreate | None = None, ctx: Ctx = Depends(get_ctx)
) -> ProposalRead:
    """Take it back from review; it can be edited and submitted again."""
    reason = body.reason if body else None
    with ctx.user_tx() as (session, user):
        row = proposals.withdraw(session, user, proposal_id, ctx.now, reason)
        return convert.proposal(proposals.view(session, row, user, ctx.now))


@router.get("/notifications", response_model=list[NotificationRead])
def my_notifications(
    limit: int = Query(50, ge=1, le=notifications.MAX_LIST), ctx: Ctx = Depends(get_ctx)
) -> list[NotificationRead]:
    """The caller's notifications, newest first (`sent_at` is set once a mailer sent it)."""
    with ctx.user_tx() as (session, user):
        return [convert.notification(r) for r in notifications.list_for(session, user.id, limit)]
