"""ledger_transfers: two (account, time) indexes instead of four single-column ones

Statements and verify read an account's transfers over a period; nothing looks transfers up by
`ref` or by time alone. Fewer indexes make the metering pass's bulk insert cheaper.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 21:30:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

OLD = ("debit_account_id", "credit_account_id", "ref", "created_at")


def upgrade() -> None:
    for column in OLD:
        op.drop_index(f"ix_ledger_transfers_{column}", table_name="ledger_transfers")
    op.create_index(
        "ix_ledger_transfers_debit_time", "ledger_transfers", ["debit_account_id", "created_at"]
    )
    op.create_index(
        "ix_ledger_transfers_credit_time", "ledger_transfers", ["credit_account_id", "created_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_ledger_transfers_credit_time", table_name="ledger_transfers")
    op.drop_index("ix_ledger_transfers_debit_time", table_name="ledger_transfers")
    for column in OLD:
        op.create_index(f"ix_ledger_transfers_{column}", "ledger_transfers", [column])
