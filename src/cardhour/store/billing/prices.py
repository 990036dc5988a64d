"""Price versions and quotes."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from cardhour.db.models import PriceVersionRow, QuoteRow


def list_versions(session: Session) -> list[PriceVersionRow]:
    stmt = select(PriceVersionRow).order_by(
        PriceVersionRow.gpu_model,
        PriceVersionRow.data_centre,
        PriceVersionRow.effective_from,
        PriceVersionRow.id,  # of two versions from the same moment, the later one wins
    )
    return list(session.scalars(stmt))


def version_columns(session: Session) -> list[tuple[str, str | None, int, str, datetime]]:
    """`list_versions` as (gpu model, data centre, on-demand micros, currency, effective from)
    tuples, in the same order: plain rows, no ORM objects (read on every launch)."""
    v = PriceVersionRow
    stmt = select(v.gpu_model, v.data_centre, v.on_demand_micros, v.currency, v.effective_from)
    stmt = stmt.order_by(v.gpu_model, v.data_centre, v.effective_from, v.id)
    return [tuple(r) for r in session.execute(stmt)]  # type: ignore[misc]


def add_versions(session: Session, rows: list[PriceVersionRow]) -> None:
    session.add_all(rows)
    session.flush()


def add_quote(session: Session, row: QuoteRow) -> QuoteRow:
    session.add(row)
    session.flush()
    return row


def get_quote(session: Session, quote_id: str) -> QuoteRow | None:
    return session.get(QuoteRow, quote_id)
