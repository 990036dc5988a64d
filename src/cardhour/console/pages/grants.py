"""Console pages of the compute sponsorship programme, the applicant team's side: my proposals,
the draft form (with the PDF), submit, withdraw, one proposal's page (state, history, reviews
count, the grant's usage once approved) and my notifications.

The proposal page is shared by every role that may read the proposal: assigned reviewers see
their conflict and score forms on it, admins their assign and decision forms
(`reviews.py` posts those). Every error of a service is shown in the page with its HTTP
status; a proposal the viewer may not read is a 404 page, as in the API.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from cardhour.console.context import Page, signed_in
from cardhour.console.views import grants as gv
from cardhour.core import proposals as rules
from cardhour.core.errors import CardhourError
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


def message_page(page: Page, exc: CardhourError) -> Response:
    """A page with only the error (for a proposal the viewer cannot read, a missing role)."""
    return page.render("grant_message.html", exc.http_status, error=exc.message)


def proposal_page(page: Page, proposal_id: str, status: int = 200, **ctx: Any) -> Response:
    """The proposal as the viewer may see it, with `ctx` (an `error`, the forms' values) on
    top."""
    session, user = page.session, page.user
    try:
        row, v = gv.readable_view(session, proposal_id, user, page.now)
        shown = gv.detail(session, v, user)
        shown["mine"] = gv.my_assignment(session, user, row)
    except CardhourError as exc:
        if "error" in ctx:  # a refused POST by someone who may not read it: show the refusal
            return page.render("grant_message.html", status, error=ctx["error"])
        return message_page(page, exc)
    return page.render("grant.html", status, **{**shown, **ctx})


@router.get("/grants", response_class=HTMLResponse)
def my_proposals(request: Request) -> Response:
    with signed_in(request) as page:
        session, user = page.session, page.user
        rows = [
            gv.summary(proposals.view(session, row, user, page.now))
            for row in proposals.mine(session, user)
        ]
        return page.render("grants.html", rows=rows)


def _form_page(
    page: Page,
    form: dict[str, Any],
    proposal_id: str | None = None,
    status: int = 200,
    error: str | None = None,
) -> Response:
    return page.render(
        "grant_form.html",
        status,
        form=form,
        proposal_id=proposal_id,
        gpus=gv.gpu_choices(page.platform.catalog),
        max_hours=rules.MAX_CARD_HOURS,
        max_pdf_mib=rules.MAX_DOCUMENT_BYTES // (1024 * 1024),
        error=error,
    )


@router.get("/grants/new", response_class=HTMLResponse)
def new_proposal(request: Request) -> Response:
    with signed_in(request) as page:
        return _form_page(page, gv.blank_form(page.now))


@router.get("/grants/{proposal_id}/edit", response_class=HTMLResponse)
def edit_page(request: Request, proposal_id: str) -> Response:
    with signed_in(request) as page:
        session, user = page.session, page.user
        try:
            row = proposals.for_team(session, proposal_id, user)
            rules.check_editable(row.status)
            form = gv.form_of(session, row, proposals.view(session, row, user, page.now))
        except CardhourError as exc:
            return message_page(page, exc)
        return _form_page(page, form, proposal_id)


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
    """Create or edit the draft and attach the PDF, in one savepoint: a bad PDF saves
    nothing."""
    with signed_in(request) as page:
        p, user, now = page.platform, page.user, page.now
        try:
            page.check_csrf(form["csrf"])
            data = gv.proposal_input(form)
            with page.attempt() as session:
                if proposal_id is None:
                    row = proposals.create(session, p.catalog, user, data, now)
                else:
                    row = proposals.edit(session, p.catalog, user, proposal_id, data, now)
                if pdf is not None:
                    proposals.attach_document(
                        session, p.settings.data_dir, user, row.id, pdf, content_type, now
                    )
                saved = row.id
        except CardhourError as exc:
            return _form_page(page, form, proposal_id, exc.http_status, exc.message)
    return RedirectResponse(f"/grants/{saved}", status_code=303)


@router.get("/grants/{proposal_id}", response_class=HTMLResponse)
def show(request: Request, proposal_id: str) -> Response:
    with signed_in(request) as page:
        return proposal_page(page, proposal_id)


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
    with signed_in(request) as page:
        user, now = page.user, page.now
        try:
            page.check_csrf(csrf)
            with page.attempt() as session:
                if action == "submit":
                    proposals.submit(session, user, proposal_id, now)
                else:
                    proposals.withdraw(session, user, proposal_id, now, reason.strip() or None)
        except CardhourError as exc:
            return proposal_page(page, proposal_id, exc.http_status, error=exc.message)
    return RedirectResponse(f"/grants/{proposal_id}", status_code=303)


@router.get("/grants/{proposal_id}/document")
def document(request: Request, proposal_id: str) -> Response:
    """The PDF, for whoever may read the proposal."""
    with signed_in(request) as page:
        data_dir = page.platform.settings.data_dir
        try:
            data = proposals.read_document(page.session, data_dir, page.user, proposal_id)
        except CardhourError as exc:
            return message_page(page, exc)
    return Response(
        data,
        media_type=rules.PDF_CONTENT_TYPE,
        headers={"Content-Disposition": f'inline; filename="proposal-{proposal_id}.pdf"'},
    )


@router.get("/notifications", response_class=HTMLResponse)
def my_notifications(request: Request) -> Response:
    """The outbox rows for me, newest first (whether a mailer sent them yet)."""
    with signed_in(request) as page:
        rows = gv.notification_rows(notifications.list_for(page.session, page.user.id, 100))
        return page.render("notifications.html", rows=rows)
