"""PostgreSQL: pages of instances and ledger accounts half empty, so every metering update is HOT

0004 left 30% of each page free. Measured on one metering pass over 10,000 running instances
(bench/billing.py's data), that room took only 4,764 of the 10,000 instance updates and 4,012 of
the 10,002 account updates as heap-only tuples; the others wrote to every index of the table.
The pass rewrites every running instance and its accounts each minute, so a page needs room for
a second version of each of its rows: at fillfactor 50 all 20,002 were heap-only, and the pass
went from about 1.8 s to 1.4 s. The tables are small (one row per instance, a few per user), so
twice their size costs little. Applies to pages written from now on (`VACUUM FULL` rewrites the
old ones). No-op on SQLite.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03 09:30:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TABLES = ("instances", "ledger_accounts")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} SET (fillfactor = 50)")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} SET (fillfactor = 70)")
