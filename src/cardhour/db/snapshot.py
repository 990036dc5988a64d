"""One consistent snapshot for a transaction that reads several related tables (a statement).

PostgreSQL runs READ COMMITTED by default, so two queries of one transaction may see different
commits (a metering pass in between); REPEATABLE READ makes them see one snapshot. SQLite needs
nothing: every transaction here starts with `BEGIN IMMEDIATE`, which keeps writers out.
"""

from __future__ import annotations

from sqlalchemy.orm import Session


def read_one_snapshot(session: Session) -> None:
    """Call first in the transaction, before any query (the level is set when the connection
    is procured, and reset when it goes back to the pool)."""
    if session.get_bind().dialect.name == "postgresql":
        session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
