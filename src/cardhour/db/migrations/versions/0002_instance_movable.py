"""instances.movable: the owner lets the operator move the instance to defragment the fleet

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-09 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # existing instances were launched without consent to be moved: false
    op.add_column(
        "instances",
        sa.Column("movable", sa.Boolean(), server_default=sa.false(), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("instances", "movable")  # SQLite ≥ 3.35 drops columns natively
