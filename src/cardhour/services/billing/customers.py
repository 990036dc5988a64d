"""Customers: a user with a wallet. Sign-up creates the user (accounts) and opens their ledger
accounts with the trial credit (billing) in one transaction."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core.money import Money
from cardhour.db.models import UserRow
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import credit_accounts, ledger


@dataclass(frozen=True)
class Trial:
    """The sign-up credit: how much, and how long it lasts (None: it never expires)."""

    amount: Money
    lifetime: timedelta | None = None


def sign_up(
    session: Session,
    email: str,
    password: str,
    now: datetime,
    trial: Trial,
    role: str = "user",
) -> UserRow:
    """Create the user, open their cash account and grant the trial credit exactly once (ledger
    transfer `credit:trial-<user>`)."""
    user = accounts.create_user(session, email, password, now, role)
    ledger.open_user_accounts(session, user.id, trial.amount.currency, now)
    if trial.amount.micros > 0:
        expires = now + trial.lifetime if trial.lifetime is not None else None
        credit_accounts.grant_credit(
            session,
            user.id,
            credit_accounts.CreditGrant(ledger.TRIAL, trial.amount, f"trial-{user.id}", expires),
            now,
        )
    return user


def ensure_admin(
    session: Session, email: str, password: str, now: datetime, trial: Trial
) -> tuple[UserRow, bool]:
    """The bootstrap admin: created on first start. Returns (user, created)."""
    existing = accounts.find_by_email(session, email)
    if existing is not None:
        return existing, False
    return sign_up(session, email, password, now, trial, role="admin"), True
