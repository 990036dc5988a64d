"""Console pages of the compute sponsorship programme, the applicant team's side: my proposals,
the draft form (with the PDF), submit, withdraw, one proposal's page (state, history, reviews
count, the grant's usage once approved) and my notifications.

The proposal page is shared by every role that may read the proposal: assigned reviewers see
their conflict and score forms on it, admins their assign and decision forms
(`grants_review.py` posts those). Every error of a service is shown in the page with its HTTP
status; a proposal the viewer may not read is a 404 page, as in the API.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from cardhour.console import grants_views as gv
from cardhour.console.routes import _page, _platform, _signin_redirect, _who
from cardhour.console.session import Viewer, check_csrf
from cardhour.core import proposals as rules
from cardhour.core.errors import CardhourError
from cardhour.db.engine import transaction
from cardhour.services.accounts import notifications
from cardhour.services.grants import proposals

router = APIRouter(include_in_schema=False)

FORM_FIELDS = (
    "title",
    "abstract",
    "institution",
    "card_hours",
    "period_start",
    "period_end",
    "justification",
    "members",
)


def message_page(request: Request, who: Viewer, exc: CardhourError) -> Response:
    """A page with only the error (for a proposal the viewer cannot read, a missing role)."""
    return _page(request, "grant_message.html", who, exc.http_status, error=exc.message)


def proposal_page(
    request: Request, who: Viewer, proposal_id: str, status: int = 200, **ctx: Any
) -> Response:
    """The proposal as `who` may see it, with `ctx` (an `error`, the forms' values) on top."""
    p = _platform(request)
    now = p.clock.now()
    try:
        with transaction(p.sessions) as session:
            row, v = gv.readable_view(session, proposal_id, who.user, now)
            page = gv.detail(session, v, who.user)
            page["mine"] = gv.my_assignment(session, who.user, row)
    except CardhourError as exc:
        if "error" in ctx:  # a refused POST by someone who may not read it: show the refusal
            return _page(request, "grant_message.html", who, status, error=ctx["error"])
        return message_page(request, who, exc)
    return _page(request, "grant.html", who, status, **{**page, **ctx})


@router.get("/grants", response_class=HTMLResponse)
def my_proposals(request: Request) -> Response:
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    now = p.clock.now()
    with transaction(p.sessions) as session:
        rows = [
            gv.summary(proposals.view(session, row, who.user, now))
            for row in proposals.mine(session, who.user)
        ]
    return _page(request, "grants.html", who, rows=rows)


def _form_page(
    request: Request,
    who: Viewer,
    form: dict[str, Any],
    proposal_id: str | None = None,
    status: int = 200,
    error: str | None = None,
) -> Response:
    p = _platform(request)
    return _page(
        request,
        "grant_form.html",
        who,
        status,
        form=form,
        proposal_id=proposal_id,
        gpus=gv.gpu_choices(p.catalog),
        max_hours=rules.MAX_CARD_HOURS,
        max_pdf_mib=rules.MAX_DOCUMENT_BYTES // (1024 * 1024),
        error=error,
    )


@router.get("/grants/new", response_class=HTMLResponse)
def new_proposal(request: Request) -> Response:
    who = _who(request)
    if who is None:
        return _signin_redirect()
    return _form_page(request, who, gv.blank_form(_platform(request).clock.now()))


@router.get("/grants/{proposal_id}/edit", response_class=HTMLResponse)
def edit_page(request: Request, proposal_id: str) -> Response:
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    try:
        with transaction(p.sessions) as session:
            row = proposals.for_team(session, proposal_id, who.user)
            rules.check_editable(row.status)
            form = gv.form_of(session, row, proposals.view(session, row, who.user, p.clock.now()))
    except CardhourError as exc:
        return message_page(request, who, exc)
    return _form_page(request, who, form, proposal_id)


async def _posted(request: Request) -> tuple[dict[str, Any], bytes | None, str | None]:
    """The form's fields, and the PDF's bytes (read one byte past the limit) and content type
    when a file was chosen."""
    data = await request.form()
    form: dict[str, Any] = {name: str(data.get(name) or "") for name in FORM_FIELDS}
    form["gpu_models"] = [str(m) for m in data.getlist("gpu_models")]
    form["csrf"] = str(data.get("csrf") or "")
    upload = data.get("document")
    if isinstance(upload, UploadFile) and upload.filename:
        pdf = await upload.read(rules.MAX_DOCUMENT_BYTES + 1)
        return form, pdf, upload.content_type
    return form, None, None


@router.post("/grants/new")
async def create(request: Request) -> Response:
    form, pdf, content_type = await _posted(request)
    return await run_in_threadpool(_save, request, None, form, pdf, content_type)


@router.post("/grants/{proposal_id}/edit")
async def edit(request: Request, proposal_id: str) -> Response:
    form, pdf, content_type = await _posted(request)
    return await run_in_threadpool(_save, request, proposal_id, form, pdf, content_type)


def _save(
    request: Request,
    proposal_id: str | None,
    form: dict[str, Any],
    pdf: bytes | None,
    content_type: str | None,
) -> Response:
    """Create or edit the draft and attach the PDF, in one transaction: a bad PDF saves
    nothing."""
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    now = p.clock.now()
    try:
        check_csrf(request, form["csrf"])
        data = gv.proposal_input(form)
        with transaction(p.sessions) as session:
            if proposal_id is None:
                row = proposals.create(session, p.catalog, who.user, data, now)
            else:
                row = proposals.edit(session, p.catalog, who.user, proposal_id, data, now)
            if pdf is not None:
                proposals.attach_document(
                    session, p.settings.data_dir, who.user, row.id, pdf, content_type, now
                )
            saved = row.id
    except CardhourError as exc:
        return _form_page(request, who, form, proposal_id, exc.http_status, exc.message)
    return RedirectResponse(f"/grants/{saved}", status_code=303)


@router.get("/grants/{proposal_id}", response_class=HTMLResponse)
def show(request: Request, proposal_id: str) -> Response:
    who = _who(request)
    if who is None:
        return _signin_redirect()
    return proposal_page(request, who, proposal_id)


@router.post("/grants/{proposal_id}/submit")
def submit(request: Request, proposal_id: str, csrf: str = Form("")) -> Response:
    return _team_action(request, proposal_id, "submit", csrf, "")


@router.post("/grants/{proposal_id}/withdraw")
def withdraw(
    request: Request, proposal_id: str, csrf: str = Form(""), reason: str = Form("")
) -> Response:
    return _team_action(request, proposal_id, "withdraw", csrf, reason)


def _team_action(
    request: Request, proposal_id: str, action: str, csrf: str, reason: str
) -> Response:
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    now = p.clock.now()
    try:
        check_csrf(request, csrf)
        with transaction(p.sessions) as session:
            if action == "submit":
                proposals.submit(session, who.user, proposal_id, now)
            else:
                proposals.withdraw(session, who.user, proposal_id, now, reason.strip() or None)
    except CardhourError as exc:
        return proposal_page(request, who, proposal_id, exc.http_status, error=exc.message)
    return RedirectResponse(f"/grants/{proposal_id}", status_code=303)


@router.get("/grants/{proposal_id}/document")
def document(request: Request, proposal_id: str) -> Response:
    """The PDF, for whoever may read the proposal."""
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    try:
        with transaction(p.sessions) as session:
            data = proposals.read_document(session, p.settings.data_dir, who.user, proposal_id)
    except CardhourError as exc:
        return message_page(request, who, exc)
    return Response(
        data,
        media_type=rules.PDF_CONTENT_TYPE,
        headers={"Content-Disposition": f'inline; filename="proposal-{proposal_id}.pdf"'},
    )


@router.get("/notifications", response_class=HTMLResponse)
def my_notifications(request: Request) -> Response:
    """The outbox rows for me, newest first (whether a mailer sent them yet)."""
    who = _who(request)
    if who is None:
        return _signin_redirect()
    p = _platform(request)
    with transaction(p.sessions) as session:
        rows = gv.notification_rows(notifications.list_for(session, who.user.id, 100))
    return _page(request, "notifications.html", who, rows=rows)
