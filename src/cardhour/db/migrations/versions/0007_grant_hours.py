"""grants of card-hours: grants, grant_members, ledger_accounts.valid_from

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 03:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ledger_accounts") as batch:
        batch.add_column(sa.Column("valid_from", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "grants",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("proposal_id", sa.String(length=32), nullable=True),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("account_key", sa.String(length=100), nullable=False),
        sa.Column("card_hours", sa.Integer(), nullable=False),
        sa.Column("gpu_models", sa.String(length=200), nullable=False),
        sa.Column("valid_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("account_key"),
    )
    op.create_index("ix_grants_proposal_id", "grants", ["proposal_id"])
    op.create_table(
        "grant_members",
        sa.Column("grant_id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(["grant_id"], ["grants.id"]),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("grant_id", "user_id"),
    )
    op.create_index("ix_grant_members_user_id", "grant_members", ["user_id"])


def downgrade() -> None:
    op.drop_index("ix_grant_members_user_id", table_name="grant_members")
    op.drop_table("grant_members")
    op.drop_index("ix_grants_proposal_id", table_name="grants")
    op.drop_table("grants")
    with op.batch_alter_table("ledger_accounts") as batch:
        batch.drop_column("valid_from")
