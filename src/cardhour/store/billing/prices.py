"""Price versions and quotes."""

from __future__ import annotations

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


def add_versions(session: Session, rows: list[PriceVersionRow]) -> None:
    session.add_all(rows)
    session.flush()


def add_quote(session: Session, row: QuoteRow) -> QuoteRow:
    session.add(row)
    session.flush()
    return row


def get_quote(session: Session, quote_id: str) -> QuoteRow | None:
    return session.get(QuoteRow, quote_id)
