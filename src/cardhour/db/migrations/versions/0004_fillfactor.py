"""PostgreSQL: leave room in the pages of rows the metering pass rewrites every minute

Instances (`billed_micros`, `charged_at`) and ledger accounts (cached totals) are updated in
bulk by every metering pass. None of those columns is indexed, so with free space in the page
PostgreSQL can make each update a heap-only tuple and skip every index. No-op on SQLite.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 20:25:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TABLES = ("instances", "ledger_accounts")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} SET (fillfactor = 70)")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} RESET (fillfactor)")
