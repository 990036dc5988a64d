"""readiness gate: instance_stages, nodes.drained_reason

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "instance_stages",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("instance_id", sa.String(length=32), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["instance_id"], ["instances.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("instance_id", "attempt", "name", name="uq_instance_stage"),
    )
    op.create_index("ix_instance_stages_instance_id", "instance_stages", ["instance_id"])
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("drained_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("drained_reason")
    op.drop_index("ix_instance_stages_instance_id", table_name="instance_stages")
    op.drop_table("instance_stages")
