"""hosts: the directory's version (one row, moved by every change of what the host book reads
but a heartbeat) and each host's `brief_version` (the directory version of its last such
change), so that a tick reads only the hosts that changed since the last

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07 13:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "host_directory",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.execute("INSERT INTO host_directory (id, version) VALUES (1, 0)")
    with op.batch_alter_table("hosts") as batch:
        batch.add_column(
            sa.Column("brief_version", sa.BigInteger(), nullable=False, server_default="0")
        )
        batch.create_index("ix_hosts_brief_version", ["brief_version"])


def downgrade() -> None:
    with op.batch_alter_table("hosts") as batch:
        batch.drop_index("ix_hosts_brief_version")
        batch.drop_column("brief_version")
    op.drop_table("host_directory")
