"""Sign-in and sign-up throttling (docs/dev/security.md).

Each failed attempt (a wrong password, an unknown email, a refused sign-up) counts against two
keys: the account (`account:<email>`) and the client address (`address:<ip>`). `ACCOUNT_LIMIT`
failures of an account, or `ADDRESS_LIMIT` of an address (many people may share one), within
`WINDOW` lock that key for `BASE_LOCK`, doubled for each lock it earned before (at most
`MAX_LOCK`). While a key is locked every attempt on it, the right password included, is refused
with 429 `too_many_attempts` and `Retry-After`, before any password is checked. A successful
sign-in clears its account's count and strikes (not its address's). Each lock is an event an
operator reads (`GET /api/v1/admin/auth-events`, `cardhour admin auth-events`).

The counts live in the database, so every API process of one platform shares them; the check,
the attempt and the count of a failure are three transactions (a failure is counted even
though the attempt's own transaction rolled back).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from sqlalchemy.orm import Session, sessionmaker

from cardhour.core.clock import as_utc
from cardhour.core.errors import Conflict, InvalidInput, TooManyAttempts, Unauthorized
from cardhour.db.engine import transaction
from cardhour.db.models import AuthEventRow, AuthThrottleRow
from cardhour.services.ids import new_id
from cardhour.store.accounts import throttles as store

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
ACCOUNT_LIMIT, ADDRESS_LIMIT = 10, 30
WINDOW = timedelta(minutes=1)
BASE_LOCK, MAX_LOCK = timedelta(minutes=1), timedelta(hours=1)
FORGET_AFTER = timedelta(days=1)  # a key untouched this long (and unlocked) starts afresh
T = TypeVar("T")


def keys_of(email: str, address: str | None) -> list[str]:
    """The keys an attempt counts against (control characters, which a text column may not
    hold, shown as `?`)."""
    keys = [f"account:{_CONTROL.sub('?', (email or '').strip().lower()[:320])}"]
    if address:
        keys.append(f"address:{_CONTROL.sub('?', address[:64])}")
    return keys


def _limit(key: str) -> int:
    return ADDRESS_LIMIT if key.startswith("address:") else ACCOUNT_LIMIT


def check(session: Session, keys: list[str], now: datetime) -> None:
    """TooManyAttempts while one of `keys` is locked, with the seconds left (`retry_after`)."""
    left = [
        as_utc(row.locked_until) - now
        for row in store.get(session, keys)
        if row.locked_until is not None and as_utc(row.locked_until) > now
    ]
    if left:
        seconds = math.ceil(max(left).total_seconds())
        raise TooManyAttempts(
            f"too many failed attempts: try again in {seconds} s", retry_after=seconds
        )


def failed(session: Session, keys: list[str], now: datetime) -> None:
    """Count a failed attempt against `keys`; a key reaching its limit in the window is
    locked (an event says so)."""
    store.forget_before(session, now - FORGET_AFTER)
    for row in store.lock(session, keys, now):
        if row.locked_until is not None and as_utc(row.locked_until) > now:
            continue  # attempts in flight when it locked: not a second lock
        if now - as_utc(row.window_start) >= WINDOW:
            row.failures, row.window_start = 0, now
        row.failures += 1
        row.updated_at = now
        if row.failures >= _limit(row.key):
            _lock(session, row, now)


def _lock(session: Session, row: AuthThrottleRow, now: datetime) -> None:
    length = min(BASE_LOCK * 2**row.strikes, MAX_LOCK)
    row.locked_until, row.strikes, row.failures = now + length, row.strikes + 1, 0
    detail = (
        f"{_limit(row.key)} failed attempts within {WINDOW.seconds} s: locked for "
        f"{int(length.total_seconds())} s (lock {row.strikes})"
    )
    store.add_event(session, AuthEventRow(id=new_id(), at=now, kind="locked", key=row.key,
                                          detail=detail))  # fmt: skip


def attempt(
    sessions: sessionmaker[Session],
    now: datetime,
    email: str,
    address: str | None,
    act: Callable[[Session], T],
) -> T:
    """Run `act` (a sign-in or a sign-up, in its own transaction) under the throttle: refused
    while its keys are locked; a refusal it raises (401, 409, 422) is counted, a success clears
    the account's count."""
    keys = keys_of(email, address)
    with transaction(sessions) as session:
        check(session, keys, now)
    try:
        with transaction(sessions) as session:
            result = act(session)
            store.clear(session, keys[0])
            return result
    except (Unauthorized, Conflict, InvalidInput):
        with transaction(sessions) as session:
            failed(session, keys, now)
        raise


def events(session: Session, limit: int = 100) -> list[AuthEventRow]:
    """The latest locks, newest first."""
    return store.events(session, max(1, min(limit, 1000)))
