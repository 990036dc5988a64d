"""A credit's own ledger account: opened and funded once from its issuer (`grant_credit`), and
swept back to the issuer when it expires (`expire_credits`).

Credits are money the platform gives (kinds `ledger.CREDIT_KINDS`), spent before cash in the
order `services.billing.wallet` documents. Contracts: granting is idempotent by credit id (the
same id with the same terms moves nothing the second time, with other terms it is refused with
`Conflict`); an expired credit's balance goes back to its issuer once (`ledger.ISSUER`), in one
transaction that locks only ledger accounts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.errors import Conflict, InvalidInput
from cardhour.core.money import Money
from cardhour.services.billing import ledger
from cardhour.store.billing import ledger as ledger_store


@dataclass(frozen=True)
class CreditGrant:
    """A credit: money the platform gives, spent before cash, possibly limited in time and use."""

    kind: str  # TRIAL | SLA | GRANT (the ledger's credit kinds)
    amount: Money
    credit_id: str  # idempotency: the same id is granted once
    expires_at: datetime | None = None
    gpu_models: tuple[str, ...] = ()  # empty: any model
    priority: int | None = None  # default: the ledger's DEFAULT_PRIORITY[kind]
    ref: str | None = None


def grant_credit(session: Session, user_id: str, grant: CreditGrant, now: datetime) -> str:
    """Open the credit's own account and fund it from its issuer. Returns the account key."""
    if grant.kind not in ledger.CREDIT_KINDS:
        raise InvalidInput(f"unknown credit kind {grant.kind!r}")
    if grant.amount.micros <= 0:
        raise InvalidInput("a credit must be positive")
    if grant.expires_at is not None and grant.expires_at <= now:
        raise InvalidInput("a credit cannot expire before it is granted")
    if grant.kind == ledger.TRIAL:
        key = ledger.user_key(user_id, ledger.TRIAL)
    else:
        key = ledger.credit_key(user_id, grant.credit_id)
    models = ",".join(grant.gpu_models) or None
    priority = ledger.DEFAULT_PRIORITY[grant.kind] if grant.priority is None else grant.priority
    row = ledger.ensure_account(
        session,
        key,
        grant.kind,
        grant.amount.currency,
        user_id,
        created_at=now,
        expires_at=grant.expires_at,
        gpu_models=models,
        priority=priority,
    )
    expires = as_utc(row.expires_at) if row.expires_at is not None else None
    if (row.kind, expires, row.gpu_models, row.priority) != (
        grant.kind,
        grant.expires_at,
        models,
        priority,
    ):
        raise Conflict(f"credit {grant.credit_id} exists with different terms")
    ledger.post(
        session,
        f"credit:{grant.credit_id}",
        ledger.platform_key(ledger.ISSUER[grant.kind]),
        key,
        grant.amount,
        grant.kind,
        now,
        ref=grant.ref or user_id,
    )
    return key


def expire_credits(session: Session, now: datetime) -> int:
    """Sweep what is left on expired credits back to their issuers. Returns the transfers made."""
    expired = ledger_store.expired_with_balance(session, now)
    if not expired:
        return 0
    keys = [r.key for r in expired] + [ledger.platform_key(ledger.ISSUER[r.kind]) for r in expired]
    book = ledger.open_book(session, now, keys)
    for row in expired:
        locked = book.row(row.key)
        left = ledger.balance_of(locked)
        if left > 0:
            book.transfer(
                f"expire:{locked.id}:{locked.debits_posted}",
                locked.key,
                ledger.platform_key(ledger.ISSUER[locked.kind]),
                left,
                "credit_expiry",
                locked.owner_id,
            )
    book.flush()
    return book.posted
