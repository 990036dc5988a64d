"""volumes: persistent volumes with their events, where an instance must be placed (its
volumes' data centre and, for a host's own volume, host), and the host its disk is kept on

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07 19:20:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "volumes",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("owner_id", sa.String(32), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False, server_default="volume"),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("data_centre", sa.String(32), nullable=False),
        sa.Column("size_gb", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("store", sa.Text(), nullable=True),
        sa.Column("host", sa.String(64), nullable=True),
        sa.Column("instance_id", sa.String(32), nullable=True),
        sa.Column("mount_path", sa.String(255), nullable=True),
        sa.Column("formatted_at", TS, nullable=True),
        sa.Column("price_micros", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("billed_micros", sa.BigInteger(), nullable=False),
        sa.Column("billed_until", TS, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("delete_requested_at", TS, nullable=True),
        sa.Column("deleted_at", TS, nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("overdue_since", TS, nullable=True),
        sa.Column("overdue_warned_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "volume_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("volume_id", sa.String(32), sa.ForeignKey("volumes.id"), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_volume_events_volume_id", "volume_events", ["volume_id"])
    op.create_index("ix_volumes_owner_id", "volumes", ["owner_id"])
    op.create_index("ix_volumes_instance", "volumes", ["instance_id"])
    op.create_index("ix_volumes_state", "volumes", ["state"])
    op.create_index(
        "uq_volumes_owner_live_name",
        "volumes",
        ["owner_id", "name"],
        unique=True,
        sqlite_where=sa.text("state <> 'deleted' AND kind = 'volume'"),
        postgresql_where=sa.text("state <> 'deleted' AND kind = 'volume'"),
    )
    with op.batch_alter_table("instances") as batch:
        batch.add_column(sa.Column("placement_dc", sa.String(32), nullable=True))
        batch.add_column(sa.Column("placement_host", sa.String(64), nullable=True))
        batch.add_column(sa.Column("disk_host", sa.String(64), nullable=True))
        batch.create_index("ix_instances_disk_host", ["disk_host"])


def downgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.drop_index("ix_instances_disk_host")
        batch.drop_column("disk_host")
        batch.drop_column("placement_host")
        batch.drop_column("placement_dc")
    op.drop_table("volume_events")
    op.drop_table("volumes")
