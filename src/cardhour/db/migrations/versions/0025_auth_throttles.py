"""auth throttles: failed sign-ins and sign-ups counted per account and client address, the
locks they earn, and the events an operator reads

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-07 22:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "auth_throttles",
        sa.Column("key", sa.String(400), primary_key=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("window_start", TS, nullable=False),
        sa.Column("locked_until", TS, nullable=True),
        sa.Column("strikes", sa.Integer(), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )
    op.create_index("ix_auth_throttles_updated_at", "auth_throttles", ["updated_at"])
    op.create_table(
        "auth_events",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("at", TS, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("key", sa.String(400), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
    )
    op.create_index("ix_auth_events_at", "auth_events", ["at"])


def downgrade() -> None:
    op.drop_table("auth_events")
    op.drop_table("auth_throttles")
