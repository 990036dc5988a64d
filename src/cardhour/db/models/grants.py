"""Compute grants: proposals, their team, reviewers, reviews and events; granted card-hours and
their members.

The same `Base` as `cardhour.db.models`: importing this module registers the tables on its
metadata (`cardhour.db.migrate` and the Alembic env import it, so the schema check sees them).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from cardhour.db.models.base import TS, Base


class ProposalRow(Base):
    """A request for sponsored card-hours. `gpu_models` are comma-separated model ids."""

    __tablename__ = "proposals"
    __table_args__ = (
        CheckConstraint("card_hours BETWEEN 1 AND 100000", name="ck_proposal_hours"),
        Index("ix_proposals_status", "status"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)  # who created it
    title: Mapped[str] = mapped_column(String(200))
    abstract: Mapped[str] = mapped_column(Text)
    institution: Mapped[str] = mapped_column(String(200))
    card_hours: Mapped[int] = mapped_column(Integer)
    gpu_models: Mapped[str] = mapped_column(String(200))
    period_start: Mapped[datetime] = mapped_column(TS)
    period_end: Mapped[datetime] = mapped_column(TS)
    justification: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20))
    # one review round per submission: only the current round's reviews count for a decision
    round: Mapped[int] = mapped_column(Integer, default=0)
    # the PDF lives at <data_dir>/proposals/<id>.pdf
    document_bytes: Mapped[int | None] = mapped_column(Integer, nullable=True)
    document_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # the last decision (approve: what was granted; reject / request changes: the reason)
    decision_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    approved_hours: Mapped[int | None] = mapped_column(Integer, nullable=True)
    approved_gpu_models: Mapped[str | None] = mapped_column(String(200), nullable=True)
    grant_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(TS)
    updated_at: Mapped[datetime] = mapped_column(TS)
    submitted_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)


class ProposalMemberRow(Base):
    """One member of the applicant team (the creator is always one)."""

    __tablename__ = "proposal_members"

    proposal_id: Mapped[str] = mapped_column(ForeignKey("proposals.id"), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), primary_key=True, index=True)


class ProposalReviewerRow(Base):
    """A reviewer assigned by an admin; `conflict_at` set once they declare a conflict."""

    __tablename__ = "proposal_reviewers"

    proposal_id: Mapped[str] = mapped_column(ForeignKey("proposals.id"), primary_key=True)
    reviewer_id: Mapped[str] = mapped_column(ForeignKey("users.id"), primary_key=True, index=True)
    assigned_by: Mapped[str] = mapped_column(String(32))
    assigned_at: Mapped[datetime] = mapped_column(TS)
    conflict_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    conflict_reason: Mapped[str | None] = mapped_column(Text, nullable=True)


class ProposalReviewRow(Base):
    """One reviewer's scores for one round (scoring again in the round replaces them)."""

    __tablename__ = "proposal_reviews"
    __table_args__ = (
        UniqueConstraint("proposal_id", "reviewer_id", "round", name="uq_review_round"),
        CheckConstraint("technical_merit BETWEEN 1 AND 5", name="ck_review_merit"),
        CheckConstraint("feasibility BETWEEN 1 AND 5", name="ck_review_feasibility"),
        CheckConstraint("compute_justification BETWEEN 1 AND 5", name="ck_review_justification"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    proposal_id: Mapped[str] = mapped_column(ForeignKey("proposals.id"), index=True)
    reviewer_id: Mapped[str] = mapped_column(ForeignKey("users.id"))
    round: Mapped[int] = mapped_column(Integer)
    technical_merit: Mapped[int] = mapped_column(Integer)
    feasibility: Mapped[int] = mapped_column(Integer)
    compute_justification: Mapped[int] = mapped_column(Integer)
    comments: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(TS)
    updated_at: Mapped[datetime] = mapped_column(TS)


class ProposalEventRow(Base):
    """One state change (creation included: `from_status` None), with who made it and why."""

    __tablename__ = "proposal_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    proposal_id: Mapped[str] = mapped_column(ForeignKey("proposals.id"), index=True)
    at: Mapped[datetime] = mapped_column(TS)
    actor_id: Mapped[str] = mapped_column(String(32))
    action: Mapped[str] = mapped_column(String(20))
    from_status: Mapped[str | None] = mapped_column(String(20), nullable=True)
    to_status: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)


class GrantRow(Base):
    """A grant of card-hours to a team: its hours live in the ledger account `account_key`
    (unit `MGS`, milli-GPU-seconds), usable by every member for `gpu_models` in
    [`valid_from`, `expires_at`)."""

    __tablename__ = "grants"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    proposal_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    title: Mapped[str] = mapped_column(String(200))
    account_key: Mapped[str] = mapped_column(String(100), unique=True)
    card_hours: Mapped[int] = mapped_column(Integer)
    gpu_models: Mapped[str] = mapped_column(String(200))  # comma-separated
    valid_from: Mapped[datetime] = mapped_column(TS)
    expires_at: Mapped[datetime] = mapped_column(TS)
    created_at: Mapped[datetime] = mapped_column(TS)


class GrantMemberRow(Base):
    """A member of a grant's team: their instances of the grant's models spend its hours."""

    __tablename__ = "grant_members"

    grant_id: Mapped[str] = mapped_column(ForeignKey("grants.id"), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), primary_key=True, index=True)
