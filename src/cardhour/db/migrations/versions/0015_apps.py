"""apps, app_versions, app_calls, app_payouts: the AI app marketplace

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 14:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "apps",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("slug", sa.String(length=48), nullable=False),
        sa.Column("developer_id", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=True),
        sa.Column("current_version", sa.Integer(), nullable=False),
        sa.Column("live_version", sa.Integer(), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.ForeignKeyConstraint(["developer_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("slug"),
    )
    op.create_index("ix_apps_developer_id", "apps", ["developer_id"])
    op.create_table(
        "app_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("app_id", sa.String(length=32), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("manifest", sa.Text(), nullable=False),
        sa.Column("price_micros", sa.BigInteger(), nullable=False),
        sa.Column("code_sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("approved_at", TS, nullable=True),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("app_id", "version", name="uq_app_version"),
    )
    op.create_index("ix_app_versions_app_id", "app_versions", ["app_id"])
    op.create_table(
        "app_calls",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("call_key", sa.String(length=128), nullable=False),
        sa.Column("app_id", sa.String(length=32), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("caller_id", sa.String(length=32), nullable=False),
        sa.Column("developer_id", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("price_micros", sa.BigInteger(), nullable=False),
        sa.Column("developer_micros", sa.BigInteger(), nullable=False),
        sa.Column("platform_micros", sa.BigInteger(), nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.Column("matures_at", TS, nullable=False),
        sa.Column("matured_at", TS, nullable=True),
        sa.Column("refunded_at", TS, nullable=True),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"]),
        sa.ForeignKeyConstraint(["caller_id"], ["users.id"]),
        sa.ForeignKeyConstraint(["developer_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("caller_id", "call_key", name="uq_app_call_key"),
    )
    op.create_index("ix_app_calls_developer_id", "app_calls", ["developer_id"])
    op.create_index("ix_app_calls_maturing", "app_calls", ["matured_at", "matures_at"])
    op.create_index("ix_app_calls_app_at", "app_calls", ["app_id", "at"])
    op.create_table(
        "app_payouts",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("developer_id", sa.String(length=32), nullable=False),
        sa.Column("amount_micros", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(length=8), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("requested_at", TS, nullable=False),
        sa.Column("paid_at", TS, nullable=True),
        sa.Column("reference", sa.String(length=128), nullable=True),
        sa.ForeignKeyConstraint(["developer_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_app_payouts_developer_id", "app_payouts", ["developer_id"])


def downgrade() -> None:
    op.drop_index("ix_app_payouts_developer_id", table_name="app_payouts")
    op.drop_table("app_payouts")
    for name in ("ix_app_calls_app_at", "ix_app_calls_maturing", "ix_app_calls_developer_id"):
        op.drop_index(name, table_name="app_calls")
    op.drop_table("app_calls")
    op.drop_index("ix_app_versions_app_id", table_name="app_versions")
    op.drop_table("app_versions")
    op.drop_index("ix_apps_developer_id", table_name="apps")
    op.drop_table("apps")
