"""Proposals, their team, reviewers, reviews and events. Flush, never commit."""

from __future__ import annotations

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from cardhour.db.locking import for_update
from cardhour.db.models import (
    ProposalEventRow,
    ProposalMemberRow,
    ProposalReviewerRow,
    ProposalReviewRow,
    ProposalRow,
    UserRow,
)


def add(session: Session, row: object) -> None:
    session.add(row)
    session.flush()


def get_proposal(session: Session, proposal_id: str, lock: bool = False) -> ProposalRow | None:
    """The proposal; with `lock`, its row is locked until the transaction ends (PostgreSQL)."""
    stmt = select(ProposalRow).where(ProposalRow.id == proposal_id)
    if lock:
        stmt = for_update(stmt)
    return session.scalars(stmt).first()


def list_proposals(session: Session, status: str | None = None) -> list[ProposalRow]:
    stmt = select(ProposalRow).order_by(ProposalRow.created_at, ProposalRow.id)
    if status is not None:
        stmt = stmt.where(ProposalRow.status == status)
    return list(session.scalars(stmt))


def proposals_of_member(session: Session, user_id: str) -> list[ProposalRow]:
    stmt = (
        select(ProposalRow)
        .join(ProposalMemberRow, ProposalMemberRow.proposal_id == ProposalRow.id)
        .where(ProposalMemberRow.user_id == user_id)
        .order_by(ProposalRow.created_at, ProposalRow.id)
    )
    return list(session.scalars(stmt))


def members(session: Session, proposal_id: str) -> list[UserRow]:
    stmt = (
        select(UserRow)
        .join(ProposalMemberRow, ProposalMemberRow.user_id == UserRow.id)
        .where(ProposalMemberRow.proposal_id == proposal_id)
        .order_by(UserRow.email)
    )
    return list(session.scalars(stmt))


def is_member(session: Session, proposal_id: str, user_id: str) -> bool:
    return session.get(ProposalMemberRow, (proposal_id, user_id)) is not None


def set_members(session: Session, proposal_id: str, user_ids: list[str]) -> None:
    """Replace the team with `user_ids`."""
    session.execute(delete(ProposalMemberRow).where(ProposalMemberRow.proposal_id == proposal_id))
    session.add_all(ProposalMemberRow(proposal_id=proposal_id, user_id=u) for u in user_ids)
    session.flush()


def users_by_email(session: Session, emails: list[str]) -> dict[str, UserRow]:
    """Users whose email (compared in lower case) is in `emails`, keyed by lower-case email."""
    if not emails:
        return {}
    wanted = [e.lower() for e in emails]
    stmt = select(UserRow).where(func.lower(UserRow.email).in_(wanted))
    return {row.email.lower(): row for row in session.scalars(stmt)}


def reviewer(session: Session, proposal_id: str, user_id: str) -> ProposalReviewerRow | None:
    return session.get(ProposalReviewerRow, (proposal_id, user_id))


def reviewers(session: Session, proposal_id: str) -> list[tuple[ProposalReviewerRow, UserRow]]:
    stmt = (
        select(ProposalReviewerRow, UserRow)
        .join(UserRow, UserRow.id == ProposalReviewerRow.reviewer_id)
        .where(ProposalReviewerRow.proposal_id == proposal_id)
        .order_by(UserRow.email)
    )
    return [(a, u) for a, u in session.execute(stmt).all()]


def assignments_of(session: Session, user_id: str) -> list[tuple[ProposalReviewerRow, ProposalRow]]:
    stmt = (
        select(ProposalReviewerRow, ProposalRow)
        .join(ProposalRow, ProposalRow.id == ProposalReviewerRow.proposal_id)
        .where(ProposalReviewerRow.reviewer_id == user_id)
        .order_by(ProposalRow.created_at, ProposalRow.id)
    )
    return [(a, p) for a, p in session.execute(stmt).all()]


def reviews(
    session: Session, proposal_id: str, round: int | None = None
) -> list[tuple[ProposalReviewRow, UserRow]]:
    """The proposal's reviews with their reviewers (of one round when given), oldest first."""
    stmt = (
        select(ProposalReviewRow, UserRow)
        .join(UserRow, UserRow.id == ProposalReviewRow.reviewer_id)
        .where(ProposalReviewRow.proposal_id == proposal_id)
        .order_by(ProposalReviewRow.round, ProposalReviewRow.created_at, ProposalReviewRow.id)
    )
    if round is not None:
        stmt = stmt.where(ProposalReviewRow.round == round)
    return [(r, u) for r, u in session.execute(stmt).all()]


def review_of(
    session: Session, proposal_id: str, reviewer_id: str, round: int
) -> ProposalReviewRow | None:
    stmt = select(ProposalReviewRow).where(
        ProposalReviewRow.proposal_id == proposal_id,
        ProposalReviewRow.reviewer_id == reviewer_id,
        ProposalReviewRow.round == round,
    )
    return session.scalars(stmt).first()


def delete_review(session: Session, review: ProposalReviewRow) -> None:
    session.delete(review)
    session.flush()


def events(session: Session, proposal_id: str) -> list[ProposalEventRow]:
    stmt = (
        select(ProposalEventRow)
        .where(ProposalEventRow.proposal_id == proposal_id)
        .order_by(ProposalEventRow.id)
    )
    return list(session.scalars(stmt))
