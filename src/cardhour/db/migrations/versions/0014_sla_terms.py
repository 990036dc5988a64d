"""instances.sla_seconds (the SLA window in force at launch), sla_warned_at, node_order

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 13:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(
            sa.Column("sla_seconds", sa.Integer(), nullable=False, server_default="900")
        )
        batch.add_column(sa.Column("sla_warned_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("node_order", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.drop_column("node_order")
        batch.drop_column("sla_warned_at")
        batch.drop_column("sla_seconds")
