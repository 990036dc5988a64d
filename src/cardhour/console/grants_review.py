"""Console pages of the sponsorship programme for reviewers (role `reviewer`: my assignments,
declare a conflict, score) and admins (every proposal, assign reviewers, decide, set a role, the
grants dashboard). The services check the roles; a refusal is shown in the page with its status.
"""

from __future__ import annotations

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from cardhour.console import grants_views as gv
from cardhour.console.grants import message_page, proposal_page
from cardhour.console.routes import _page, _platform, _signin_redirect, _who
from cardhour.console.session import Viewer, check_csrf
from cardhour.core.errors import CardhourError
from cardhour.core.proposals import CRITERIA, ProposalStatus
from cardhour.db.engine import transaction
from cardhour.services.accounts import users as accounts
from cardhour.services.grants import hours as grant_hours
from cardhour.services.grants import proposals
from cardhour.services.grants import reviews as proposal_reviews

router = APIRouter(include_in_schema=False)


@router.get("/reviews", response_class=HTMLResponse)
def my_assignments(request: Request) -> Response:
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    try:
        with transaction(p.sessions) as session:
            rows = gv.assignment_rows(session, who.user)
    except CardhourError as exc:
        return message_page(request, who, exc)
    return _page(request, "reviews.html", who, rows=rows)


@router.post("/reviews/{proposal_id}/conflict")
def declare_conflict(
    request: Request, proposal_id: str, reason: str = Form(""), csrf: str = Form("")
) -> Response:
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    try:
        check_csrf(request, csrf)
        with transaction(p.sessions) as session:
            proposal_reviews.declare_conflict(session, who.user, proposal_id, reason, p.clock.now())
    except CardhourError as exc:
        ctx = {"error": exc.message, "conflict_reason": reason}
        return proposal_page(request, who, proposal_id, exc.http_status, **ctx)
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
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    posted = {
        "technical_merit": technical_merit,
        "feasibility": feasibility,
        "compute_justification": compute_justification,
    }
    try:
        check_csrf(request, csrf)
        scores = {name: gv.number(posted[name]) for name in CRITERIA}
        with transaction(p.sessions) as session:
            proposal_reviews.score(session, who.user, proposal_id, scores, comments, p.clock.now())
    except CardhourError as exc:
        ctx = {"error": exc.message, "score_form": {**posted, "comments": comments}}
        return proposal_page(request, who, proposal_id, exc.http_status, **ctx)
    return RedirectResponse(f"/grants/{proposal_id}", status_code=303)


# admins -----------------------------------------------------------------------------------


@router.get("/admin/proposals", response_class=HTMLResponse)
def all_proposals(request: Request, status: str = "") -> Response:
    """Every proposal (drafts included) with its state and this round's reviews; `?status=`."""
    who = _who(request)
    if who is None:
        return _signin_redirect()
    return _admin_list(request, who, status)


def _admin_list(
    request: Request, who: Viewer, status: str, code: int = 200, **ctx: str
) -> Response:
    p = _platform(request)
    now = p.clock.now()
    try:
        with transaction(p.sessions) as session:
            rows = [
                gv.summary(proposals.view(session, row, who.user, now))
                for row in proposal_reviews.list_all(session, who.user, status.strip() or None)
            ]
    except CardhourError as exc:
        return message_page(request, who, exc)
    states = [s.value for s in ProposalStatus]
    return _page(
        request,
        "admin_proposals.html",
        who,
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
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    try:
        check_csrf(request, csrf)
        with transaction(p.sessions) as session:
            proposal_reviews.assign(
                session, who.user, proposal_id, gv.emails(reviewers), p.clock.now()
            )
    except CardhourError as exc:
        ctx = {"error": exc.message, "assign_value": reviewers}
        return proposal_page(request, who, proposal_id, exc.http_status, **ctx)
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
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    try:
        check_csrf(request, csrf)
        hours = gv.number(card_hours) if card_hours.strip() else None
        with transaction(p.sessions) as session:
            proposal_reviews.decide(
                session,
                p.catalog,
                who.user,
                proposal_id,
                decision,
                p.clock.now(),
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
            request, who, proposal_id, exc.http_status, error=exc.message, decision_form=form
        )
    return RedirectResponse(f"/grants/{proposal_id}", status_code=303)


@router.post("/admin/users/role")
def set_role(
    request: Request, email: str = Form(""), role: str = Form(""), csrf: str = Form("")
) -> Response:
    """Give an account a role (reviewers need `reviewer` before they can be assigned)."""
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    try:
        check_csrf(request, csrf)
        with transaction(p.sessions) as session:
            user = accounts.set_role(session, who.user, email, role)
            done = f"{user.email} now has the role {user.role}"
    except CardhourError as exc:
        if exc.http_status == 403:
            return message_page(request, who, exc)
        return _admin_list(request, who, "", exc.http_status, error=exc.message)
    return _admin_list(request, who, "", notice=done)


@router.get("/admin/grants", response_class=HTMLResponse)
def dashboard(request: Request) -> Response:
    """Every grant: hours granted, used, expired, remaining; a line per grant."""
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    try:
        accounts.require_admin(who.user)
        with transaction(p.sessions) as session:
            board = grant_hours.dashboard(session, p.clock.now()).to_dict()
    except CardhourError as exc:
        return message_page(request, who, exc)
    board["lines"] = [gv.grant_rows(line) for line in board["lines"]]
    return _page(request, "admin_grants.html", who, board=board)
