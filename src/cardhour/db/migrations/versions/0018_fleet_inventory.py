"""fleet_inventory: the fleet inventory's version (the launch's capacity summary is cached by it)

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05 12:00:00.000000
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "fleet_inventory",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.bulk_insert(table, [{"id": 1, "version": uuid.uuid4().hex}])


def downgrade() -> None:
    op.drop_table("fleet_inventory")
