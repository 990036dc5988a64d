"""What the grants pages show, and the form fields they post, over the same services as the API
(`services.proposals`, `services.proposal_reviews`, `services.notifications`,
`services.grant_hours`).

Form parsing only turns text into the types the services take (whole numbers, dates); every
rule (1-100,000 card-hours, models in the catalog, end after start, who may do what) is the
services' own, so the console shows the same messages as the API.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy.orm import Session

from cardhour.core.catalog import Catalog
from cardhour.core.clock import as_utc
from cardhour.core.errors import InvalidInput
from cardhour.core.proposals import CRITERIA, EDITABLE, FINAL, ProposalStatus
from cardhour.db.models import NotificationRow, ProposalRow, UserRow
from cardhour.services.accounts import users as accounts
from cardhour.services.grants import proposals
from cardhour.services.grants import reviews as proposal_reviews
from cardhour.services.grants.proposals import ProposalInput, ProposalView, models_of

CRITERIA_LABELS = {
    "technical_merit": "Technical merit",
    "feasibility": "Feasibility",
    "compute_justification": "Compute justification",
}
DECISIONS = {
    "approve": "Approve",
    "reject": "Reject",
    "request_changes": "Ask for changes",
}
assert set(CRITERIA_LABELS) == set(CRITERIA)


def when(at: datetime | None) -> str:
    return f"{as_utc(at):%Y-%m-%d %H:%M} UTC" if at else "—"


def whole_number(text: str, what: str) -> int:
    """A whole number from a form field (thousands separators allowed); InvalidInput otherwise."""
    cleaned = re.sub(r"[\s,_]", "", text or "")
    if not re.fullmatch(r"-?\d+", cleaned):
        raise InvalidInput(f"{what} must be a whole number", field=what.replace(" ", "_"))
    return int(cleaned)


def number(text: str) -> Any:
    """A whole number from a form field, or the text as typed for the service to refuse (so a
    role check comes before a complaint about the input, as in the API)."""
    try:
        return whole_number(text, "value")
    except InvalidInput:
        return text


def day(text: str, what: str) -> datetime:
    """A date field (YYYY-MM-DD) as midnight UTC."""
    try:
        parsed = date.fromisoformat((text or "").strip())
    except ValueError as exc:
        raise InvalidInput(f"{what} must be a date (YYYY-MM-DD)", field=what) from exc
    return datetime(parsed.year, parsed.month, parsed.day, tzinfo=UTC)


def emails(text: str) -> list[str]:
    """Emails separated by commas, spaces or new lines."""
    return [e for e in re.split(r"[\s,;]+", text or "") if e]


def proposal_input(form: dict[str, Any]) -> ProposalInput:
    """The create/edit form as the service's input (every field sent)."""
    return ProposalInput(
        title=form["title"],
        abstract=form["abstract"],
        institution=form["institution"],
        card_hours=whole_number(form["card_hours"], "card-hours"),
        gpu_models=list(form["gpu_models"]),
        period_start=day(form["period_start"], "period_start"),
        period_end=day(form["period_end"], "period_end"),
        justification=form["justification"],
        members=emails(form["members"]),
    )


def blank_form(now: datetime) -> dict[str, Any]:
    return {
        "title": "",
        "abstract": "",
        "institution": "",
        "card_hours": "",
        "gpu_models": [],
        "period_start": f"{now:%Y-%m-%d}",
        "period_end": "",
        "justification": "",
        "members": "",
    }


def form_of(session: Session, row: ProposalRow, v: ProposalView) -> dict[str, Any]:
    """The edit form filled from the proposal (the team without its creator)."""
    owner = accounts.get_user(session, row.owner_id)
    others = [e for e in v.members if owner is None or e != owner.email]
    return {
        "title": row.title,
        "abstract": row.abstract,
        "institution": row.institution,
        "card_hours": str(row.card_hours),
        "gpu_models": models_of(row.gpu_models),
        "period_start": f"{as_utc(row.period_start):%Y-%m-%d}",
        "period_end": f"{as_utc(row.period_end):%Y-%m-%d}",
        "justification": row.justification,
        "members": "\n".join(others),
    }


def gpu_choices(catalog: Catalog) -> list[dict[str, str]]:
    return [{"id": m.id, "name": m.name} for m in catalog.gpu_models]


def summary(v: ProposalView) -> dict[str, Any]:
    """One line of a list of proposals."""
    row = v.row
    return {
        "id": row.id,
        "title": row.title,
        "institution": row.institution,
        "status": row.status,
        "round": row.round,
        "card_hours": f"{row.card_hours:,}",
        "approved_hours": f"{row.approved_hours:,}" if row.approved_hours else None,
        "gpu_models": ", ".join(models_of(row.gpu_models)),
        "reviews_count": v.reviews_count,
        "reviewers": None if v.reviewers is None else len(v.reviewers),
        "updated": when(row.updated_at),
    }


def detail(session: Session, v: ProposalView, viewer: UserRow) -> dict[str, Any]:
    """Everything the proposal page shows to `viewer` (already allowed to read it)."""
    row = v.row
    status = ProposalStatus(row.status)
    on_team = viewer.email in v.members
    actors: dict[str, str] = {}
    for e in v.events:
        if e.actor_id not in actors:
            actor = accounts.get_user(session, e.actor_id)
            actors[e.actor_id] = actor.email if actor else e.actor_id
    return {
        "p": {
            **summary(v),
            "abstract": row.abstract,
            "justification": row.justification,
            "members": v.members,
            "requested_models": models_of(row.gpu_models),
            "approved_models": ", ".join(models_of(row.approved_gpu_models)),
            "period": f"{as_utc(row.period_start):%Y-%m-%d} to {as_utc(row.period_end):%Y-%m-%d}",
            "document": row.document_bytes,
            "decision_reason": row.decision_reason,
            "grant_id": row.grant_id,
        },
        "events": [
            {
                "at": when(e.at),
                "actor": actors[e.actor_id],
                "action": e.action.replace("_", " "),
                "from": e.from_status or "—",
                "to": e.to_status,
                "reason": e.reason or "",
            }
            for e in v.events
        ],
        "on_team": on_team,
        "can_edit": on_team and status in EDITABLE,
        "can_submit": on_team and status in EDITABLE,
        "can_withdraw": on_team
        and status in (ProposalStatus.SUBMITTED, ProposalStatus.CHANGES_REQUESTED),
        "grant": grant_rows(v.grant) if v.grant else None,
        "reviewers": None
        if v.reviewers is None
        else [
            {"email": u.email, "conflict": a.conflict_at is not None, "reason": a.conflict_reason}
            for a, u in v.reviewers
        ],
        "reviews": None
        if v.reviews is None
        else [
            {
                "email": u.email,
                "round": r.round,
                "scores": [(CRITERIA_LABELS[c], getattr(r, c)) for c in CRITERIA],
                "comments": r.comments,
                "at": when(r.updated_at),
            }
            for r, u in v.reviews
        ],
        "can_assign": viewer.role == "admin" and status not in FINAL,
        "can_decide": viewer.role == "admin" and status == ProposalStatus.SUBMITTED,
        "criteria": CRITERIA_LABELS,
        "decisions": DECISIONS,
    }


def my_assignment(session: Session, viewer: UserRow, row: ProposalRow) -> dict[str, Any] | None:
    """The viewer's assignment to `row` if they are a reviewer assigned to it: whether they
    declared a conflict, their review of this round, whether the score form is shown."""
    if viewer.role != "reviewer":
        return None
    for a in proposal_reviews.assignments(session, viewer):
        if a.proposal.id != row.id:
            continue
        conflicted = a.assignment.conflict_at is not None
        review = a.review
        return {
            "conflict": conflicted,
            "conflict_reason": a.assignment.conflict_reason,
            "review": None
            if review is None
            else {c: getattr(review, c) for c in CRITERIA} | {"comments": review.comments},
            "can_score": not conflicted and row.status == ProposalStatus.SUBMITTED,
        }
    return None


def grant_rows(report: dict[str, Any]) -> dict[str, Any]:
    """A grant's usage report (`grant_hours.report(...).to_dict()`) for `_grant_report.html`."""

    def at(value: Any) -> str:
        if value is None:
            return "—"
        return when(value if isinstance(value, datetime) else datetime.fromisoformat(str(value)))

    return {
        **report,
        "valid_from": at(report.get("valid_from")),
        "expires_at": at(report.get("expires_at")),
        "runs_out_at": at(report.get("runs_out_at")) if report.get("runs_out_at") else None,
        "gpu_models": ", ".join(report.get("gpu_models") or []),
        "members": ", ".join(report.get("members") or []),
    }


def notification_rows(rows: list[NotificationRow]) -> list[dict[str, Any]]:
    return [
        {
            "subject": n.subject,
            "body": n.body,
            "at": when(n.created_at),
            "sent": when(n.sent_at) if n.sent_at else None,
        }
        for n in rows
    ]


def assignment_rows(session: Session, reviewer: UserRow) -> list[dict[str, Any]]:
    """The reviewer's assignments (`forbidden` without the role)."""
    return [
        {
            "id": a.proposal.id,
            "title": a.proposal.title,
            "institution": a.proposal.institution,
            "status": a.proposal.status,
            "round": a.proposal.round,
            "conflict": a.assignment.conflict_at is not None,
            "scored": a.review is not None,
        }
        for a in proposal_reviews.assignments(session, reviewer)
    ]


def readable_view(
    session: Session, proposal_id: str, viewer: UserRow, now: datetime
) -> tuple[ProposalRow, ProposalView]:
    row = proposals.readable(session, proposal_id, viewer)
    return row, proposals.view(session, row, viewer, now)
