"""app_replicas: capacity app replicas hold on the fleet (placed by the scheduler)

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03 16:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "app_replicas",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("app_key", sa.String(length=64), nullable=False),
        sa.Column("node_id", sa.String(length=64), nullable=False),
        sa.Column("gpus", sa.String(length=64), nullable=False),
        sa.Column("milli", sa.Integer(), nullable=False),
        sa.Column("cpu_milli", sa.Integer(), nullable=False),
        sa.Column("memory_mib", sa.Integer(), nullable=False),
        sa.Column("runtime_id", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_app_replicas_node_id", "app_replicas", ["node_id"])
    op.create_index("ix_app_replicas_runtime_id", "app_replicas", ["runtime_id"])
    op.create_index("ix_app_replicas_seen_at", "app_replicas", ["seen_at"])


def downgrade() -> None:
    for name in (
        "ix_app_replicas_seen_at",
        "ix_app_replicas_runtime_id",
        "ix_app_replicas_node_id",
    ):
        op.drop_index(name, table_name="app_replicas")
    op.drop_table("app_replicas")
