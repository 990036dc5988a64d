"""hosts: what the last full report said (a digest) and at which version, so that a heartbeat
that repeats it is one UPDATE; the inventory's key, so that a tick reads an inventory only when
it changed

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07 07:00:00.000000
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("hosts") as batch:
        batch.add_column(sa.Column("report_digest", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("reported_version", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("inventory_key", sa.String(length=16), nullable=True))
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT id, inventory FROM hosts WHERE inventory IS NOT NULL"))
    for host_id, text in rows.all():  # core.hosts.inventory_key, as it was written
        key = hashlib.sha256(text.encode()).hexdigest()[:16] if text else ""
        bind.execute(
            sa.text("UPDATE hosts SET inventory_key = :key WHERE id = :id"),
            {"key": key, "id": host_id},
        )


def downgrade() -> None:
    with op.batch_alter_table("hosts") as batch:
        batch.drop_column("inventory_key")
        batch.drop_column("reported_version")
        batch.drop_column("report_digest")
