"""billing: credits with expiry and model limits, hold accounts, usage segments, versioned prices,
quotes, monthly plans, auto-stop warnings, idempotency keys

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02 19:35:07.382380
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("method", sa.String(length=8), nullable=False),
        sa.Column("path", sa.String(length=255), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("response_body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id", "key", name="uq_idempotency_user_key"),
    )
    op.create_index(
        op.f("ix_idempotency_keys_created_at"), "idempotency_keys", ["created_at"], unique=False
    )
    op.create_table(
        "price_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("gpu_model", sa.String(length=32), nullable=False),
        sa.Column("data_centre", sa.String(length=32), nullable=True),
        sa.Column("on_demand_micros", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("effective_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(length=32), nullable=True),
        sa.CheckConstraint("on_demand_micros > 0", name="ck_price_positive"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_price_versions_key",
        "price_versions",
        ["gpu_model", "data_centre", "effective_from"],
        unique=False,
    )
    op.create_table(
        "quotes",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("gpu_model", sa.String(length=32), nullable=False),
        sa.Column("data_centre", sa.String(length=32), nullable=True),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("plan", sa.String(length=16), nullable=False),
        sa.Column("price_micros", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("valid_until", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_quotes_user_id"), "quotes", ["user_id"], unique=False)
    op.create_table(
        "usage_segments",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("instance_id", sa.String(length=32), nullable=False),
        sa.Column("owner_id", sa.String(length=32), nullable=False),
        sa.Column("gpu_model", sa.String(length=32), nullable=False),
        sa.Column("data_centre", sa.String(length=32), nullable=True),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("price_micros", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("milli_gpu_seconds", sa.BigInteger(), nullable=False),
        sa.Column("amount_micros", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["instance_id"],
            ["instances.id"],
        ),
        sa.ForeignKeyConstraint(
            ["owner_id"],
            ["users.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        op.f("ix_usage_segments_instance_id"), "usage_segments", ["instance_id"], unique=False
    )
    op.create_index(
        "ix_usage_segments_owner_start", "usage_segments", ["owner_id", "started_at"], unique=False
    )
    op.add_column("instances", sa.Column("quoted_price_micros", sa.BigInteger(), nullable=True))
    op.add_column("instances", sa.Column("quote_id", sa.String(length=32), nullable=True))
    op.add_column("instances", sa.Column("plan_until", sa.DateTime(timezone=True), nullable=True))
    op.add_column("instances", sa.Column("plan_at_expiry", sa.String(length=16), nullable=True))
    op.add_column(
        "instances", sa.Column("closed_frac", sa.BigInteger(), server_default="0", nullable=False)
    )
    op.add_column(
        "ledger_accounts", sa.Column("created_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column(
        "ledger_accounts", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column("ledger_accounts", sa.Column("gpu_models", sa.String(length=200), nullable=True))
    op.add_column(
        "ledger_accounts", sa.Column("priority", sa.Integer(), server_default="100", nullable=False)
    )
    op.add_column("ledger_accounts", sa.Column("instance_id", sa.String(length=32), nullable=True))
    op.create_index(
        op.f("ix_ledger_accounts_instance_id"), "ledger_accounts", ["instance_id"], unique=False
    )
    op.create_index(
        op.f("ix_ledger_transfers_created_at"), "ledger_transfers", ["created_at"], unique=False
    )
    op.add_column(
        "users", sa.Column("low_balance_since", sa.DateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("users", "low_balance_since")
    op.drop_index(op.f("ix_ledger_transfers_created_at"), table_name="ledger_transfers")
    op.drop_index(op.f("ix_ledger_accounts_instance_id"), table_name="ledger_accounts")
    op.drop_column("ledger_accounts", "instance_id")
    op.drop_column("ledger_accounts", "priority")
    op.drop_column("ledger_accounts", "gpu_models")
    op.drop_column("ledger_accounts", "expires_at")
    op.drop_column("ledger_accounts", "created_at")
    op.drop_column("instances", "closed_frac")
    op.drop_column("instances", "plan_at_expiry")
    op.drop_column("instances", "plan_until")
    op.drop_column("instances", "quote_id")
    op.drop_column("instances", "quoted_price_micros")
    op.drop_index("ix_usage_segments_owner_start", table_name="usage_segments")
    op.drop_index(op.f("ix_usage_segments_instance_id"), table_name="usage_segments")
    op.drop_table("usage_segments")
    op.drop_index(op.f("ix_quotes_user_id"), table_name="quotes")
    op.drop_table("quotes")
    op.drop_index("ix_price_versions_key", table_name="price_versions")
    op.drop_table("price_versions")
    op.drop_index(op.f("ix_idempotency_keys_created_at"), table_name="idempotency_keys")
    op.drop_table("idempotency_keys")
