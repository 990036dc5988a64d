"""Sponsorship proposals, the team's side: create, edit, attach the PDF, submit, withdraw, read.

Every state change goes through `switch_status`, which asks `core.proposals.transition`, records
a `proposal_events` row and writes one notification per team member, all in the caller's
transaction. Who may see a proposal: its team, its assigned reviewers and admins; anyone else
gets `not_found`, so a proposal's existence does not leak.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from cardhour.core import proposals as rules
from cardhour.core.catalog import Catalog
from cardhour.core.clock import as_utc
from cardhour.core.errors import InvalidInput, NotFound
from cardhour.core.proposals import Action, ProposalStatus
from cardhour.db.models import (
    ProposalEventRow,
    ProposalReviewerRow,
    ProposalReviewRow,
    ProposalRow,
    UserRow,
)
from cardhour.services.accounts import notifications
from cardhour.services.grants import hours as grant_hours
from cardhour.services.ids import new_id
from cardhour.store.grants import proposals as store

MAX_TITLE = 200
MAX_INSTITUTION = 200
MAX_TEXT = 20_000
MAX_MEMBERS = 50


@dataclass
class ProposalInput:
    """The fields a team writes; None leaves a field as it is (on create every one is needed).
    `members` are the other members' emails; the creator is always on the team."""

    title: str | None = None
    abstract: str | None = None
    institution: str | None = None
    card_hours: int | None = None
    gpu_models: list[str] | None = None
    period_start: datetime | None = None
    period_end: datetime | None = None
    justification: str | None = None
    members: list[str] | None = None


@dataclass(frozen=True)
class ProposalView:
    """A proposal as one viewer may see it: reviewers and their scores only for admins, the
    viewer's own review for a reviewer, the grant's usage once approved."""

    row: ProposalRow
    members: list[str]
    reviews_count: int
    events: list[ProposalEventRow]
    reviewers: list[tuple[ProposalReviewerRow, UserRow]] | None = None
    reviews: list[tuple[ProposalReviewRow, UserRow]] | None = None
    grant: dict[str, Any] | None = field(default=None)


def models_of(csv: str | None) -> list[str]:
    return [m for m in (csv or "").split(",") if m]


def create(
    session: Session, catalog: Catalog, user: UserRow, data: ProposalInput, now: datetime
) -> ProposalRow:
    """A new draft with `user` and `data.members` as its team."""
    missing = [
        name
        for name in ("title", "abstract", "institution", "card_hours", "gpu_models")
        + ("period_start", "period_end", "justification")
        if getattr(data, name) is None
    ]
    if missing:
        raise InvalidInput(f"missing: {', '.join(missing)}", field=missing[0])
    row = ProposalRow(
        id=new_id(),
        owner_id=user.id,
        status=ProposalStatus.DRAFT.value,
        round=0,
        created_at=now,
        updated_at=now,
    )
    _apply(row, catalog, data)
    team = _team(session, user, data.members or [])
    store.add(session, row)
    store.set_members(session, row.id, team)
    _event(session, row, user, "create", None, ProposalStatus.DRAFT, now)
    return row


def edit(
    session: Session,
    catalog: Catalog,
    user: UserRow,
    proposal_id: str,
    data: ProposalInput,
    now: datetime,
) -> ProposalRow:
    """Change a draft (or a proposal sent back for changes, or withdrawn); `not_editable` once
    submitted."""
    row = for_team(session, proposal_id, user, lock=True)
    rules.check_editable(row.status)
    _apply(row, catalog, data)
    if data.members is not None:
        store.set_members(session, row.id, _team(session, _owner(session, row), data.members))
    row.updated_at = now
    session.flush()
    return row


def _apply(row: ProposalRow, catalog: Catalog, data: ProposalInput) -> None:
    if data.title is not None:
        row.title = rules.check_text("title", data.title, MAX_TITLE)
    if data.abstract is not None:
        row.abstract = rules.check_text("abstract", data.abstract, MAX_TEXT)
    if data.institution is not None:
        row.institution = rules.check_text("institution", data.institution, MAX_INSTITUTION)
    if data.justification is not None:
        row.justification = rules.check_text("justification", data.justification, MAX_TEXT)
    if data.card_hours is not None:
        row.card_hours = rules.check_hours(data.card_hours)
    if data.gpu_models is not None:
        models = sorted({catalog.model(m).id for m in data.gpu_models})
        if not models:
            raise InvalidInput("ask for at least one GPU model", field="gpu_models")
        row.gpu_models = ",".join(models)
    if data.period_start is not None:
        row.period_start = as_utc(data.period_start)
    if data.period_end is not None:
        row.period_end = as_utc(data.period_end)
    rules.check_period(as_utc(row.period_start), as_utc(row.period_end))


def _owner(session: Session, row: ProposalRow) -> UserRow:
    owner = session.get(UserRow, row.owner_id)
    assert owner is not None  # a foreign key
    return owner


def _team(session: Session, owner: UserRow, emails: list[str]) -> list[str]:
    """User ids of the owner plus `emails`; `invalid_input` naming any email without an account."""
    wanted = list(dict.fromkeys(e.strip().lower() for e in emails if e.strip()))
    if len(wanted) > MAX_MEMBERS:
        raise InvalidInput(f"a team has at most {MAX_MEMBERS} members", field="members")
    found = store.users_by_email(session, wanted)
    unknown = [e for e in wanted if e not in found]
    if unknown:
        raise InvalidInput(f"no account for {', '.join(unknown)}", field="members")
    return list(dict.fromkeys([owner.id, *(found[e].id for e in wanted)]))


def submit(session: Session, user: UserRow, proposal_id: str, now: datetime) -> ProposalRow:
    """Freeze the proposal and start a new review round."""
    row = for_team(session, proposal_id, user, lock=True)
    if as_utc(row.period_end) <= now:
        raise InvalidInput("the requested period has already ended", field="period_end")
    switch_status(session, row, Action.SUBMIT, user, now)
    return row


def withdraw(
    session: Session, user: UserRow, proposal_id: str, now: datetime, reason: str | None = None
) -> ProposalRow:
    """Take a submitted proposal back; it becomes editable and may be submitted again."""
    row = for_team(session, proposal_id, user, lock=True)
    switch_status(session, row, Action.WITHDRAW, user, now, reason)
    return row


def switch_status(
    session: Session,
    row: ProposalRow,
    action: Action,
    actor: UserRow,
    now: datetime,
    reason: str | None = None,
) -> ProposalStatus:
    """The one place a proposal's status changes: checks the transition, records the event and
    notifies every team member. Submitting starts a new review round."""
    old = ProposalStatus(row.status)
    new = rules.transition(old, action)
    row.status = new.value
    row.updated_at = now
    if action == Action.SUBMIT:
        row.round += 1
        row.submitted_at = now
    if action in rules.DECISIONS:
        row.decided_at = now
        row.decision_reason = reason
    _event(session, row, actor, action.value, old, new, now, reason)
    members = [u.id for u in store.members(session, row.id)]
    subject, body = _message(row, action, reason)
    notifications.notify(session, members, subject, body, now)
    return new


def _event(
    session: Session,
    row: ProposalRow,
    actor: UserRow,
    action: str,
    old: ProposalStatus | None,
    new: ProposalStatus,
    now: datetime,
    reason: str | None = None,
) -> None:
    store.add(
        session,
        ProposalEventRow(
            proposal_id=row.id,
            at=now,
            actor_id=actor.id,
            action=action,
            from_status=old.value if old else None,
            to_status=new.value,
            reason=reason,
        ),
    )


def _message(row: ProposalRow, action: Action, reason: str | None) -> tuple[str, str]:
    what = {
        Action.SUBMIT: "was submitted for review",
        Action.WITHDRAW: "was withdrawn",
        Action.APPROVE: "was approved",
        Action.REJECT: "was rejected",
        Action.REQUEST_CHANGES: "needs changes",
    }[action]
    lines = [f"Your proposal {row.title!r} ({row.id}) {what}."]
    if action == Action.APPROVE:
        models = ", ".join(models_of(row.approved_gpu_models))
        lines.append(
            f"Granted {row.approved_hours:,} card-hours on {models} "
            f"(requested {row.card_hours:,}), grant {row.grant_id}."
        )
    if reason:
        lines.append(f"Reason: {reason}")
    if action == Action.REQUEST_CHANGES:
        lines.append("Edit it and submit it again: cardhour grants submit " + row.id)
    return f"[cardhour] proposal {row.title[:200]!r} {what}", "\n".join(lines)


# -- reading ----------------------------------------------------------------------------------


def for_team(session: Session, proposal_id: str, user: UserRow, lock: bool = False) -> ProposalRow:
    """The proposal if `user` is on its team; `not_found` otherwise."""
    row = store.get_proposal(session, proposal_id, lock=lock)
    if row is None or not store.is_member(session, row.id, user.id):
        raise NotFound(f"no proposal {proposal_id!r}")
    return row


def readable(session: Session, proposal_id: str, user: UserRow) -> ProposalRow:
    """The proposal if `user` is on its team, assigned to review it, or an admin."""
    row = store.get_proposal(session, proposal_id)
    if row is None or not (
        user.role == "admin"
        or store.is_member(session, row.id, user.id)
        or store.reviewer(session, row.id, user.id) is not None
    ):
        raise NotFound(f"no proposal {proposal_id!r}")
    return row


def mine(session: Session, user: UserRow) -> list[ProposalRow]:
    return store.proposals_of_member(session, user.id)


def view(session: Session, row: ProposalRow, viewer: UserRow, now: datetime) -> ProposalView:
    """What `viewer` (already allowed to read it) sees of the proposal."""
    current = store.reviews(session, row.id, row.round)
    reviewers = reviews = None
    if viewer.role == "admin":
        reviewers = store.reviewers(session, row.id)
        reviews = store.reviews(session, row.id)
    elif store.reviewer(session, row.id, viewer.id) is not None:
        reviews = [(r, u) for r, u in current if u.id == viewer.id]
    grant = None
    if row.grant_id is not None and row.status == ProposalStatus.APPROVED:
        grant = grant_hours.report(session, row.grant_id, now).to_dict()
    return ProposalView(
        row=row,
        members=[u.email for u in store.members(session, row.id)],
        reviews_count=len(current),
        events=store.events(session, row.id),
        reviewers=reviewers,
        reviews=reviews,
        grant=grant,
    )


# -- the PDF ----------------------------------------------------------------------------------


def document_path(data_dir: Path, proposal_id: str) -> Path:
    return data_dir / "proposals" / f"{proposal_id}.pdf"


def attach_document(
    session: Session,
    data_dir: Path,
    user: UserRow,
    proposal_id: str,
    data: bytes,
    content_type: str | None,
    now: datetime,
) -> ProposalRow:
    """Store the PDF at `<data_dir>/proposals/<id>.pdf` (replacing any earlier one), written to a
    temporary file and renamed so a reader never sees half a file. Only while editable."""
    row = for_team(session, proposal_id, user, lock=True)
    rules.check_editable(row.status)
    rules.check_document(data, content_type)
    path = document_path(data_dir, row.id)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{new_id()}.part")
    partial.write_bytes(data)
    os.replace(partial, path)
    row.document_bytes = len(data)
    row.document_sha256 = hashlib.sha256(data).hexdigest()
    row.updated_at = now
    session.flush()
    return row


def read_document(session: Session, data_dir: Path, user: UserRow, proposal_id: str) -> bytes:
    row = readable(session, proposal_id, user)
    path = document_path(data_dir, row.id)
    if row.document_bytes is None or not path.exists():
        raise NotFound(f"proposal {proposal_id!r} has no PDF")
    return path.read_bytes()
