"""Cash paid in: an operator's top-up or a payment provider's `payment.succeeded` event.

Both post `ledger.top_up` (transfer id `topup:<reference>`), so a reference is credited at most
once: the same reference again with the same user and amount changes nothing, with another user
or amount it is refused (`conflict`). Payment events use the reference `payment:<event id>`.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from cardhour.core.errors import InvalidInput, NotFound
from cardhour.core.money import Money, MoneyError
from cardhour.services.billing import ledger
from cardhour.store.accounts import users as user_store
from cardhour.store.billing import ledger as ledger_store

MAX_TOP_UP = Money.parse("1000000000")
MAX_REFERENCE = 100
TRANSFER_PREFIX = "topup:"  # what `ledger.top_up` names its transfer
# plain digits: no sign, exponent or NaN (an exponent such as 1e999999999 would be parsed into
# a billion-digit integer)
_DECIMAL = re.compile(r"[0-9]{1,13}(\.[0-9]+)?")


@dataclass(frozen=True)
class TopUp:
    user_id: str
    email: str
    amount: Money
    reference: str
    transfer_id: str
    duplicate: bool  # the reference was credited before; nothing moved now


def parse_amount(text: str, currency: str) -> Money:
    """A positive decimal string with at most 6 decimals, at most 1,000,000,000."""
    if not _DECIMAL.fullmatch(text.strip()):
        raise InvalidInput(f"amount: a positive decimal string such as '100.00', got {text!r}")
    try:
        amount = Money.parse(text, currency)
    except MoneyError as exc:
        raise InvalidInput(f"amount: {exc}") from exc
    if amount.micros <= 0:
        raise InvalidInput(f"amount: must be positive, got {text!r}")
    if amount.micros > MAX_TOP_UP.micros:
        raise InvalidInput(f"amount: at most {MAX_TOP_UP.format(0)} per top-up, got {text!r}")
    return amount


def reference_or_new(reference: str | None) -> str:
    """The caller's reference (1-100 printable ASCII), or a fresh `admin-<random>` one."""
    if reference is None:
        return f"admin-{secrets.token_hex(12)}"
    if not 1 <= len(reference) <= MAX_REFERENCE or not (
        reference.isascii() and reference.isprintable()
    ):
        raise InvalidInput(f"reference: 1-{MAX_REFERENCE} printable ASCII characters")
    return reference


def top_up_by_email(
    session: Session, email: str, amount: Money, now: datetime, reference: str
) -> TopUp:
    """Credit `amount` to the cash of the account `email`, once per `reference`.

    Raises NotFound for an unknown email and Conflict when the reference was used for another
    account or amount. `duplicate` is exact on SQLite; on PostgreSQL two deliveries racing each
    other may both report False, but the money still moves once (the transfer id is unique).
    """
    user = user_store.get_user_by_email(session, email.strip())
    if user is None:
        raise NotFound(f"no account with email {email!r}")
    transfer_id = f"{TRANSFER_PREFIX}{reference}"
    duplicate = ledger_store.get_transfer(session, transfer_id) is not None
    ledger.top_up(session, user.id, amount, now, reference)
    return TopUp(user.id, user.email, amount, reference, transfer_id, duplicate)
