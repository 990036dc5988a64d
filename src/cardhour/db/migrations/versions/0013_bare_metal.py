"""instances.bare_metal: whole nodes held exclusively

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03 10:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(
            sa.Column("bare_metal", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.drop_column("bare_metal")
