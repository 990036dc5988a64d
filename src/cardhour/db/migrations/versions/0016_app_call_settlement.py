"""app_calls.settled_at: calls are recorded by the gateway and posted to the ledger in batches

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03 16:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("app_calls") as batch:
        batch.add_column(sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True))
    # calls recorded before this revision were posted when they were recorded
    op.execute("UPDATE app_calls SET settled_at = at")
    op.create_index("ix_app_calls_unsettled", "app_calls", ["settled_at", "caller_id"])


def downgrade() -> None:
    op.drop_index("ix_app_calls_unsettled", table_name="app_calls")
    with op.batch_alter_table("app_calls") as batch:
        batch.drop_column("settled_at")
