"""disk starts: a stopped instance's start without GPUs (CPU only, to reach its kept disk) and
its move to another host (the host its disk is copied from)

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07 22:20:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(
            sa.Column("no_gpu", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("move_from", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.drop_column("move_from")
        batch.drop_column("no_gpu")
