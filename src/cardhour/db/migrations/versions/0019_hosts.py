"""hosts: GPU servers run by host agents, and the containers wanted on them

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06 08:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    ts = sa.DateTime(timezone=True)
    op.create_table(
        "hosts",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("data_centre", sa.String(length=64), nullable=False),
        sa.Column("ib_leaf", sa.String(length=64), nullable=True),
        sa.Column("ib_spine", sa.String(length=64), nullable=True),
        sa.Column("token_hash", sa.String(length=64), nullable=True),
        sa.Column("token_expires_at", ts, nullable=True),
        sa.Column("credential_hash", sa.String(length=64), nullable=True),
        sa.Column("address", sa.String(length=255), nullable=True),
        sa.Column("inventory", sa.Text(), nullable=True),
        sa.Column("runtime", sa.String(length=32), nullable=True),
        sa.Column("standin", sa.Boolean(), nullable=False),
        sa.Column("desired_version", sa.Integer(), nullable=False),
        sa.Column("created_at", ts, nullable=False),
        sa.Column("joined_at", ts, nullable=True),
        sa.Column("last_seen_at", ts, nullable=True),
        sa.Column("removed_at", ts, nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
        sa.UniqueConstraint("token_hash"),
        sa.UniqueConstraint("credential_hash"),
    )
    op.create_index("ix_hosts_last_seen_at", "hosts", ["last_seen_at"])
    op.create_table(
        "host_containers",
        sa.Column("host_id", sa.String(length=32), nullable=False),
        sa.Column("workload", sa.String(length=64), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("wanted", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("report", sa.Text(), nullable=True),
        sa.Column("created_at", ts, nullable=False),
        sa.Column("updated_at", ts, nullable=False),
        sa.ForeignKeyConstraint(["host_id"], ["hosts.id"]),
        sa.PrimaryKeyConstraint("host_id", "workload"),
    )


def downgrade() -> None:
    op.drop_table("host_containers")
    op.drop_index("ix_hosts_last_seen_at", table_name="hosts")
    op.drop_table("hosts")
