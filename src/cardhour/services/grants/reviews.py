"""Sponsorship proposals, the reviewers' and admins' side: assign, declare a conflict, score,
decide. Approving issues the grant (`grant_hours.issue`) in the same transaction.

Who may do what: only admins assign and decide; only users with the reviewer role who are
assigned to the proposal, not on its team and without a declared conflict score it. Scores count
for the current round only (each submission starts one); a decision needs
`REVIEWS_FOR_DECISION` of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from cardhour.core import proposals as rules
from cardhour.core.catalog import Catalog
from cardhour.core.clock import as_utc
from cardhour.core.errors import InvalidInput, InvalidTransition, NotFound
from cardhour.core.proposals import Action, ConflictOfInterest, ProposalStatus
from cardhour.db.models import ProposalReviewerRow, ProposalReviewRow, ProposalRow, UserRow
from cardhour.services.accounts import notifications
from cardhour.services.accounts import users as accounts
from cardhour.services.grants import hours as grant_hours
from cardhour.services.grants import proposals as team_side
from cardhour.store.grants import proposals as store

MAX_COMMENTS = 20_000
MAX_REASON = 5_000


@dataclass(frozen=True)
class Assignment:
    """One proposal a reviewer is assigned to, with their own review of the current round."""

    assignment: ProposalReviewerRow
    proposal: ProposalRow
    members: list[str]
    review: ProposalReviewRow | None


@dataclass(frozen=True)
class Decision:
    proposal: ProposalRow
    grant: Any | None  # the grants-table row when approved


def list_all(session: Session, admin: UserRow, status: str | None = None) -> list[ProposalRow]:
    accounts.require_admin(admin)
    if status is not None and status not in set(ProposalStatus):
        known = ", ".join(s.value for s in ProposalStatus)
        raise InvalidInput(f"unknown status {status!r}; one of {known}", field="status")
    return store.list_proposals(session, status)


def assign(
    session: Session, admin: UserRow, proposal_id: str, emails: list[str], now: datetime
) -> ProposalRow:
    """Assign the reviewers `emails` (idempotent for those already assigned). Each must have the
    reviewer role and not be on the team; each new one is notified."""
    accounts.require_admin(admin)
    row = _get(session, proposal_id, lock=True)
    if row.status in rules.FINAL:
        raise InvalidTransition(f"the proposal is already {row.status}", state=row.status)
    wanted = list(dict.fromkeys(e.strip().lower() for e in emails if e.strip()))
    if not wanted:
        raise InvalidInput("name at least one reviewer", field="reviewers")
    found = store.users_by_email(session, wanted)
    for email in wanted:
        user = found.get(email)
        if user is None:
            raise InvalidInput(f"no account for {email}", field="reviewers")
        if user.role != "reviewer":
            raise InvalidInput(f"{email} does not have the reviewer role", field="reviewers")
        if store.is_member(session, row.id, user.id):
            raise ConflictOfInterest(f"{email} is on the applicant team", field="reviewers")
    fresh = [found[e] for e in wanted if store.reviewer(session, row.id, found[e].id) is None]
    for user in fresh:
        session.add(
            ProposalReviewerRow(
                proposal_id=row.id, reviewer_id=user.id, assigned_by=admin.id, assigned_at=now
            )
        )
    session.flush()
    notifications.notify(
        session,
        [u.id for u in fresh],
        f"[cardhour] please review proposal {row.title[:200]!r}",
        f"You were assigned to review {row.title!r} ({row.id}) from {row.institution}.\n"
        f"Declare a conflict of interest or score it: cardhour grants review {row.id}",
        now,
    )
    return row


def assignments(session: Session, reviewer: UserRow) -> list[Assignment]:
    """The proposals assigned to `reviewer` that are not drafts, with their own reviews."""
    accounts.require_reviewer(reviewer)
    result = []
    for assignment, row in store.assignments_of(session, reviewer.id):
        if row.status == ProposalStatus.DRAFT:
            continue
        review = store.review_of(session, row.id, reviewer.id, row.round)
        members = [u.email for u in store.members(session, row.id)]
        result.append(Assignment(assignment, row, members, review))
    return result


def declare_conflict(
    session: Session, reviewer: UserRow, proposal_id: str, reason: str, now: datetime
) -> ProposalReviewerRow:
    """Mark the reviewer conflicted; their score of the current round, if any, no longer counts
    (it is removed). They cannot score this proposal again."""
    accounts.require_reviewer(reviewer)
    row = _get(session, proposal_id, lock=True)
    assignment = _assignment(session, row, reviewer)
    reason = rules.check_text("reason", reason, MAX_REASON)
    if assignment.conflict_at is None:
        assignment.conflict_at = now
    assignment.conflict_reason = reason
    review = store.review_of(session, row.id, reviewer.id, row.round)
    if review is not None and row.status == ProposalStatus.SUBMITTED:
        store.delete_review(session, review)
    session.flush()
    return assignment


def score(
    session: Session,
    reviewer: UserRow,
    proposal_id: str,
    scores: dict[str, int],
    comments: str,
    now: datetime,
) -> ProposalReviewRow:
    """Record (or, in the same round, replace) the reviewer's scores, 1-5 per criterion."""
    accounts.require_reviewer(reviewer)
    row = _get(session, proposal_id, lock=True)
    if store.is_member(session, row.id, reviewer.id):
        raise ConflictOfInterest("you are on this proposal's team: you cannot review it")
    assignment = _assignment(session, row, reviewer)
    if assignment.conflict_at is not None:
        raise ConflictOfInterest("you declared a conflict of interest for this proposal")
    if row.status != ProposalStatus.SUBMITTED:
        raise InvalidTransition(
            f"only a submitted proposal can be scored; this one is {row.status}",
            state=row.status,
        )
    checked = rules.check_scores(scores)
    comments = rules.check_text("comments", comments, MAX_COMMENTS, required=False)
    review = store.review_of(session, row.id, reviewer.id, row.round)
    if review is None:
        review = ProposalReviewRow(
            proposal_id=row.id, reviewer_id=reviewer.id, round=row.round, created_at=now
        )
        session.add(review)
    for name, value in checked.items():
        setattr(review, name, value)
    review.comments = comments
    review.updated_at = now
    session.flush()
    return review


def decide(
    session: Session,
    catalog: Catalog,
    admin: UserRow,
    proposal_id: str,
    decision: str,
    now: datetime,
    card_hours: int | None = None,
    gpu_models: list[str] | None = None,
    reason: str | None = None,
) -> Decision:
    """Approve (at most the hours asked, models among those asked; issues the grant), reject or
    ask for changes (both need a reason). Needs `REVIEWS_FOR_DECISION` reviews of this round."""
    accounts.require_admin(admin)
    try:
        action = Action(decision)
    except ValueError:
        action = None
    if action not in rules.DECISIONS:
        raise InvalidInput(
            f"unknown decision {decision!r}; approve, reject or request_changes", field="decision"
        )
    assert action is not None
    row = _get(session, proposal_id, lock=True)
    rules.transition(row.status, action)  # refuse early, before any grant is issued
    count = len(store.reviews(session, row.id, row.round))
    if count < rules.REVIEWS_FOR_DECISION:
        raise rules.NotEnoughReviews(
            f"a decision needs {rules.REVIEWS_FOR_DECISION} reviews; this round has {count}",
            reviews=count,
        )
    needs_reason = action != Action.APPROVE
    reason = rules.check_text("reason", reason or "", MAX_REASON, required=needs_reason)
    grant = None
    if action == Action.APPROVE:
        grant = _issue(session, catalog, row, now, card_hours, gpu_models)
    team_side.switch_status(session, row, action, admin, now, reason or None)
    return Decision(row, grant)


def _issue(
    session: Session,
    catalog: Catalog,
    row: ProposalRow,
    now: datetime,
    card_hours: int | None,
    gpu_models: list[str] | None,
) -> Any:
    hours = rules.check_hours(row.card_hours if card_hours is None else card_hours, row.card_hours)
    requested = team_side.models_of(row.gpu_models)
    chosen = requested if gpu_models is None else [catalog.model(m).id for m in gpu_models]
    models = rules.check_models_subset(chosen, requested)
    valid_from, expires_at = max(as_utc(row.period_start), now), as_utc(row.period_end)
    if expires_at <= now:
        raise InvalidInput("the proposal's period has ended: ask for changes instead")
    row.approved_hours = hours
    row.approved_gpu_models = ",".join(models)
    row.grant_id = f"proposal-{row.id}"
    return grant_hours.issue(
        session,
        grant_id=row.grant_id,
        proposal_id=row.id,
        title=row.title,
        member_ids=[u.id for u in store.members(session, row.id)],
        card_hours=hours,
        gpu_models=models,
        valid_from=valid_from,
        expires_at=expires_at,
        now=now,
    )


def _get(session: Session, proposal_id: str, lock: bool = False) -> ProposalRow:
    row = store.get_proposal(session, proposal_id, lock=lock)
    if row is None:
        raise NotFound(f"no proposal {proposal_id!r}")
    return row


def _assignment(session: Session, row: ProposalRow, reviewer: UserRow) -> ProposalReviewerRow:
    """The reviewer's assignment; `not_found` if they are not assigned (nothing leaks)."""
    assignment = store.reviewer(session, row.id, reviewer.id)
    if assignment is None:
        raise NotFound(f"no proposal {row.id!r} assigned to you")
    return assignment
