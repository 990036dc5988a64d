"""ssh_keys: SSH public keys per account

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 09:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ssh_keys",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("owner_id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("key_type", sa.String(length=64), nullable=False),
        sa.Column("bits", sa.Integer(), nullable=False),
        sa.Column("public_key", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("owner_id", "fingerprint", name="uq_ssh_keys_owner_fingerprint"),
        sa.UniqueConstraint("owner_id", "name", name="uq_ssh_keys_owner_name"),
    )
    op.create_index("ix_ssh_keys_owner_id", "ssh_keys", ["owner_id"])


def downgrade() -> None:
    op.drop_index("ix_ssh_keys_owner_id", table_name="ssh_keys")
    op.drop_table("ssh_keys")
