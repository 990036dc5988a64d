"""proposals: sponsorship proposals, their team, reviewers, reviews, events; notification outbox

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "notifications",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("subject", sa.String(length=300), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("sent_at", TS, nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_notifications_unsent",
        "notifications",
        ["id"],
        sqlite_where=sa.text("sent_at IS NULL"),
        postgresql_where=sa.text("sent_at IS NULL"),
    )
    op.create_index("ix_notifications_user_time", "notifications", ["user_id", "created_at"])
    op.create_table(
        "proposals",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("owner_id", sa.String(length=32), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("abstract", sa.Text(), nullable=False),
        sa.Column("institution", sa.String(length=200), nullable=False),
        sa.Column("card_hours", sa.Integer(), nullable=False),
        sa.Column("gpu_models", sa.String(length=200), nullable=False),
        sa.Column("period_start", TS, nullable=False),
        sa.Column("period_end", TS, nullable=False),
        sa.Column("justification", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("document_bytes", sa.Integer(), nullable=True),
        sa.Column("document_sha256", sa.String(length=64), nullable=True),
        sa.Column("decision_reason", sa.Text(), nullable=True),
        sa.Column("approved_hours", sa.Integer(), nullable=True),
        sa.Column("approved_gpu_models", sa.String(length=200), nullable=True),
        sa.Column("grant_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("submitted_at", TS, nullable=True),
        sa.Column("decided_at", TS, nullable=True),
        sa.CheckConstraint("card_hours BETWEEN 1 AND 100000", name="ck_proposal_hours"),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_proposals_owner_id"), "proposals", ["owner_id"])
    op.create_index("ix_proposals_status", "proposals", ["status"])
    op.create_table(
        "proposal_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("proposal_id", sa.String(length=32), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.Column("actor_id", sa.String(length=32), nullable=False),
        sa.Column("action", sa.String(length=20), nullable=False),
        sa.Column("from_status", sa.String(length=20), nullable=True),
        sa.Column("to_status", sa.String(length=20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["proposal_id"], ["proposals.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_proposal_events_proposal_id"), "proposal_events", ["proposal_id"])
    op.create_table(
        "proposal_members",
        sa.Column("proposal_id", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(["proposal_id"], ["proposals.id"]),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("proposal_id", "user_id"),
    )
    op.create_index(op.f("ix_proposal_members_user_id"), "proposal_members", ["user_id"])
    op.create_table(
        "proposal_reviewers",
        sa.Column("proposal_id", sa.String(length=32), nullable=False),
        sa.Column("reviewer_id", sa.String(length=32), nullable=False),
        sa.Column("assigned_by", sa.String(length=32), nullable=False),
        sa.Column("assigned_at", TS, nullable=False),
        sa.Column("conflict_at", TS, nullable=True),
        sa.Column("conflict_reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["proposal_id"], ["proposals.id"]),
        sa.ForeignKeyConstraint(["reviewer_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("proposal_id", "reviewer_id"),
    )
    op.create_index(
        op.f("ix_proposal_reviewers_reviewer_id"), "proposal_reviewers", ["reviewer_id"]
    )
    op.create_table(
        "proposal_reviews",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("proposal_id", sa.String(length=32), nullable=False),
        sa.Column("reviewer_id", sa.String(length=32), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("technical_merit", sa.Integer(), nullable=False),
        sa.Column("feasibility", sa.Integer(), nullable=False),
        sa.Column("compute_justification", sa.Integer(), nullable=False),
        sa.Column("comments", sa.Text(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.CheckConstraint("technical_merit BETWEEN 1 AND 5", name="ck_review_merit"),
        sa.CheckConstraint("feasibility BETWEEN 1 AND 5", name="ck_review_feasibility"),
        sa.CheckConstraint("compute_justification BETWEEN 1 AND 5", name="ck_review_justification"),
        sa.ForeignKeyConstraint(["proposal_id"], ["proposals.id"]),
        sa.ForeignKeyConstraint(["reviewer_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("proposal_id", "reviewer_id", "round", name="uq_review_round"),
    )
    op.create_index(op.f("ix_proposal_reviews_proposal_id"), "proposal_reviews", ["proposal_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_proposal_reviews_proposal_id"), table_name="proposal_reviews")
    op.drop_table("proposal_reviews")
    op.drop_index(op.f("ix_proposal_reviewers_reviewer_id"), table_name="proposal_reviewers")
    op.drop_table("proposal_reviewers")
    op.drop_index(op.f("ix_proposal_members_user_id"), table_name="proposal_members")
    op.drop_table("proposal_members")
    op.drop_index(op.f("ix_proposal_events_proposal_id"), table_name="proposal_events")
    op.drop_table("proposal_events")
    op.drop_index("ix_proposals_status", table_name="proposals")
    op.drop_index(op.f("ix_proposals_owner_id"), table_name="proposals")
    op.drop_table("proposals")
    op.drop_index("ix_notifications_user_time", table_name="notifications")
    op.drop_index("ix_notifications_unsent", table_name="notifications")
    op.drop_table("notifications")
