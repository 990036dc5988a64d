"""Console pages of the sponsorship programme for reviewers (role `reviewer`: my assignments,
declare a conflict, score) and admins (every proposal, assign reviewers, decide, set a role, the
grants dashboard). The services check the roles; a refusal is shown in the page with its status.
"""

from __future__ import annotations

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from cardhour.console.context import Page, signed_in
from cardhour.console.pages.grants import message_page, proposal_page
from cardhour.console.views import grants as gv
from cardhour.core.errors import CardhourError
from cardhour.core.proposals import CRITERIA, ProposalStatus
from cardhour.services.accounts import users as accounts
from cardhour.services.grants import hours as grant_hours
from cardhour.services.grants import proposals
from cardhour.services.grants import reviews as proposal_reviews

router = APIRouter(include_in_schema=False)


@router.get("/reviews", response_class=HTMLResponse)
def my_assignments(request: Request) -> Response:
    with signed_in(request) as page:
        try:
            rows = gv.assignment_rows(page.session, page.user)
        except CardhourError as exc:
            return message_page(page, exc)
        return page.render("reviews.html", rows=rows)


@router.post("/reviews/{proposal_id}/conflict")
def declare_conflict(
    request: Request, proposal_id: str, reason: str = Form(""), csrf: str = Form("")
) -> Response:
    with signed_in(request) as page:
        try:
            page.check_csrf(csrf)
            with page.attempt() as session:
                proposal_reviews.declare_conflict(session, page.user, proposal_id, reason, page.now)
        except CardhourError as exc:
            ctx = {"error": exc.message, "conflict_reason": reason}
            return proposal_page(page, proposal_id, exc.http_status, **ctx)
    return RedirectResponse(f"/grants/{proposal_id}", status_code=303)


@router.post("/reviews/{proposal_id}/score")
def score(
    request: Request,
    proposal_id: str,
    technical_merit: str = Form(""),
    feasibility: str = Form(""),
    compute_justification: str = Form(""),
    comments: str = Form(""),
    csrf: str = Form(""),
) -> Response:
    posted = {
        "technical_merit": technical_merit,
        "feasibility": feasibility,
        "compute_justification": compute_justification,
    }
    with signed_in(request) as page:
        try:
            page.check_csrf(csrf)
            scores = {name: gv.number(posted[name]) for name in CRITERIA}
            with page.attempt() as session:
                proposal_reviews.score(session, page.user, proposal_id, scores, comments, page.now)
        except CardhourError as exc:
            ctx = {"error": exc.message, "score_form": {**posted, "comments": comments}}
            return proposal_page(page, proposal_id, exc.http_status, **ctx)
    return RedirectResponse(f"/grants/{proposal_id}", status_code=303)


# admins -----------------------------------------------------------------------------------


@router.get("/admin/proposals", response_class=HTMLResponse)
def all_proposals(request: Request, status: str = "") -> Response:
    """Every proposal (drafts included) with its state and this round's reviews; `?status=`."""
    with signed_in(request) as page:
        return _admin_list(page, status)


def _admin_list(page: Page, status: str, code: int = 200, **ctx: str) -> Response:
    session, user = page.session, page.user
    try:
        rows = [
            gv.summary(proposals.view(session, row, user, page.now))
            for row in proposal_reviews.list_all(session, user, status.strip() or None)
        ]
    except CardhourError as exc:
        return message_page(page, exc)
    states = [s.value for s in ProposalStatus]
    return page.render(
        "admin_proposals.html",
        code,
        rows=rows,
        states=states,
        chosen=status,
        roles=accounts.ROLES,
        **ctx,
    )


@router.post("/admin/proposals/{proposal_id}/reviewers")
def assign(
    request: Request, proposal_id: str, reviewers: str = Form(""), csrf: str = Form("")
) -> Response:
    with signed_in(request) as page:
        try:
            page.check_csrf(csrf)
            with page.attempt() as session:
                proposal_reviews.assign(
                    session, page.user, proposal_id, gv.emails(reviewers), page.now
                )
        except CardhourError as exc:
            ctx = {"error": exc.message, "assign_value": reviewers}
            return proposal_page(page, proposal_id, exc.http_status, **ctx)
    return RedirectResponse(f"/grants/{proposal_id}", status_code=303)


@router.post("/admin/proposals/{proposal_id}/decision")
def decide(
    request: Request,
    proposal_id: str,
    decision: str = Form(""),
    card_hours: str = Form(""),
    gpu_models: list[str] = Form([]),
    reason: str = Form(""),
    csrf: str = Form(""),
) -> Response:
    """Approve (hours at most those asked, models among those asked), reject or ask for changes
    (both with a reason); the services refuse the rest."""
    with signed_in(request) as page:
        try:
            page.check_csrf(csrf)
            hours = gv.number(card_hours) if card_hours.strip() else None
            with page.attempt() as session:
                proposal_reviews.decide(
                    session,
                    page.platform.catalog,
                    page.user,
                    proposal_id,
                    decision,
                    page.now,
                    hours,
                    gpu_models,
                    reason,
                )
        except CardhourError as exc:
            form = {
                "decision": decision,
                "card_hours": card_hours,
                "models": gpu_models,
                "reason": reason,
            }
            return proposal_page(
                page, proposal_id, exc.http_status, error=exc.message, decision_form=form
            )
    return RedirectResponse(f"/grants/{proposal_id}", status_code=303)


@router.post("/admin/users/role")
def set_role(
    request: Request, email: str = Form(""), role: str = Form(""), csrf: str = Form("")
) -> Response:
    """Give an account a role (reviewers need `reviewer` before they can be assigned)."""
    with signed_in(request) as page:
        try:
            page.check_csrf(csrf)
            with page.attempt() as session:
                user = accounts.set_role(session, page.user, email, role)
                done = f"{user.email} now has the role {user.role}"
        except CardhourError as exc:
            if exc.http_status == 403:
                return message_page(page, exc)
            return _admin_list(page, "", exc.http_status, error=exc.message)
        return _admin_list(page, "", notice=done)


@router.get("/admin/grants", response_class=HTMLResponse)
def dashboard(request: Request) -> Response:
    """Every grant: hours granted, used, expired, remaining; a line per grant."""
    with signed_in(request) as page:
        try:
            accounts.require_admin(page.user)
            board = grant_hours.dashboard(page.session, page.now).to_dict()
        except CardhourError as exc:
            return message_page(page, exc)
        board["lines"] = [gv.grant_rows(line) for line in board["lines"]]
        return page.render("admin_grants.html", board=board)
