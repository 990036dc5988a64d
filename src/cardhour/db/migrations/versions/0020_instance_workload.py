"""instances: the renter's workload (command, env, ports); image widened for OCI references

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06 12:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.alter_column(
            "image",
            existing_type=sa.String(length=64),
            type_=sa.String(length=255),
            existing_nullable=False,
        )
        batch.add_column(sa.Column("command", sa.Text(), nullable=True))
        batch.add_column(sa.Column("env", sa.Text(), nullable=True))
        batch.add_column(sa.Column("ports", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.drop_column("ports")
        batch.drop_column("env")
        batch.drop_column("command")
        batch.alter_column(
            "image",
            existing_type=sa.String(length=255),
            type_=sa.String(length=64),
            existing_nullable=False,
        )
