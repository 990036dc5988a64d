"""Operator-granted credits: SLA compensation and grants (the trial credit comes with sign-up).

A credit is its own ledger account funded from its issuer (`platform:sla`, `platform:grants`),
spent before cash in the order `services.wallet` documents, possibly only for some GPU models,
and swept back to its issuer when it expires (`credit_accounts.expire_credits`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from cardhour.core.catalog import Catalog
from cardhour.core.clock import as_utc
from cardhour.core.errors import InvalidInput, NotFound
from cardhour.core.money import Money, MoneyError
from cardhour.db.models import UserRow
from cardhour.services.billing import credit_accounts, ledger
from cardhour.services.billing.credit_accounts import CreditGrant
from cardhour.store.accounts import users as user_store

GRANTABLE = (ledger.SLA, ledger.GRANT)
MAX_CREDIT = Money.parse("100000000")
MAX_REFERENCE = 40  # the account key `user:<id>:credit:grant-<reference>` fits its column


def parse_amount(text: str, currency: str) -> Money:
    try:
        amount = Money.parse(text, currency)
    except MoneyError as exc:
        raise InvalidInput(f"bad amount {text!r}: {exc}") from exc
    if not 0 < amount.micros <= MAX_CREDIT.micros:
        raise InvalidInput(f"an amount must be above 0 and at most {MAX_CREDIT.format()}")
    return amount


def grant(
    session: Session,
    catalog: Catalog,
    email: str,
    kind: str,
    amount: str,
    reference: str,
    now: datetime,
    expires_at: datetime | None = None,
    gpu_models: list[str] | None = None,
) -> tuple[UserRow, CreditGrant]:
    """Grant `kind` credit to the user with `email`, once per `reference`."""
    if kind not in GRANTABLE:
        raise InvalidInput(f"unknown credit kind {kind!r}; grantable: {', '.join(GRANTABLE)}")
    user = user_store.get_user_by_email(session, (email or "").strip().lower())
    if user is None:
        raise NotFound(f"no account for {email!r}")
    if not reference or len(reference) > MAX_REFERENCE or not reference.isprintable():
        raise InvalidInput(f"a reference is 1 to {MAX_REFERENCE} printable characters")
    models = tuple(sorted({catalog.model(m).id for m in gpu_models or []}))
    credit = CreditGrant(
        kind=kind,
        amount=parse_amount(amount, catalog.currency),
        credit_id=f"{kind.removesuffix('_credit')}-{reference}",
        expires_at=as_utc(expires_at) if expires_at is not None else None,
        gpu_models=models,
    )
    credit_accounts.grant_credit(session, user.id, credit, now)
    return user, credit
