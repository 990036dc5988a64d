"""`Idempotency-Key` rules: the request fingerprint, replay or refusal, expiry.

Contract (docs/dev/payments.md):
- A key is 1-255 printable ASCII characters, scoped to one user (`""` for unauthenticated
  callers): two users may use the same key independently.
- The fingerprint is SHA-256 over the method, the path and the canonical body (JSON re-encoded
  with sorted keys and no spaces, so key order and whitespace do not matter; anything that is
  not JSON is hashed as sent).
- A key seen before with the same fingerprint replays the stored status and body; with another
  fingerprint it is refused (`IdempotencyKeyReused`, 409).
- Only successful (2xx) responses are stored: an error rolls the whole transaction back, key
  included, so a retry runs the request again.
- A key older than `KEY_TTL` is forgotten: the next request with it runs as new (the old row is
  deleted then; nothing purges keys that are never reused).

`claim` inserts the key *before* the action runs, in the caller's transaction: a concurrent
request with the same key then waits on the unique index (PostgreSQL) or on `BEGIN IMMEDIATE`
(SQLite) instead of running its action too, and fails with `IntegrityError` once the first
commits. The caller rolls back and replays through `find` in a new transaction.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.errors import IdempotencyKeyReused, InvalidInput
from cardhour.db.models import IdempotencyKeyRow
from cardhour.store import idempotency as store

KEY_TTL = timedelta(hours=24)
MAX_KEY_LENGTH = 255
_PATH_COLUMN = 255  # IdempotencyKeyRow.path; the hash covers the full path either way


@dataclass(frozen=True)
class Fingerprint:
    method: str
    path: str
    request_hash: str  # SHA-256 hex of method, path and canonical body


@dataclass(frozen=True)
class StoredResponse:
    """A response to send again, byte for byte."""

    status_code: int
    body: str


@dataclass(frozen=True)
class Claim:
    """A key reserved in the current transaction; `complete` fills in the response."""

    row: IdempotencyKeyRow


def validate_key(key: str) -> str:
    """The key itself; raises InvalidInput unless it is 1-255 printable ASCII characters."""
    if not 1 <= len(key) <= MAX_KEY_LENGTH or not (key.isascii() and key.isprintable()):
        raise InvalidInput(
            f"Idempotency-Key must be 1-{MAX_KEY_LENGTH} printable ASCII characters",
            header="Idempotency-Key",
        )
    return key


def canonical_body(body: bytes) -> bytes:
    """JSON re-encoded with sorted keys and compact separators; other bytes unchanged."""
    if not body.strip():
        return b""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return body
    text = json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")  # JSON may escape a lone surrogate ("\ud800")


def fingerprint(method: str, path: str, body: bytes) -> Fingerprint:
    digest = hashlib.sha256()
    for part in (method.upper().encode(), path.encode(), canonical_body(body)):
        digest.update(len(part).to_bytes(8, "big"))  # length-prefixed: no ambiguous joins
        digest.update(part)
    return Fingerprint(method.upper(), path, digest.hexdigest())


def is_expired(created_at: datetime, now: datetime) -> bool:
    return as_utc(created_at) <= now - KEY_TTL


def replay(row: IdempotencyKeyRow, fp: Fingerprint) -> StoredResponse:
    """The stored response if `fp` matches the first request; raises IdempotencyKeyReused."""
    if row.request_hash != fp.request_hash:
        raise IdempotencyKeyReused(
            f"Idempotency-Key {row.key!r} was already used for a different request "
            f"({row.method} {row.path}); use a new key for a new request",
            key=row.key,
        )
    return StoredResponse(row.status_code, row.response_body)


def find(
    session: Session, user_id: str, key: str, fp: Fingerprint, now: datetime
) -> StoredResponse | None:
    """The live stored response for this key (None if absent or expired); raises
    IdempotencyKeyReused when the key belongs to another request."""
    row = store.get_key(session, user_id, key)
    if row is None or is_expired(row.created_at, now):
        return None
    return replay(row, fp)


def claim(
    session: Session, user_id: str, key: str, fp: Fingerprint, now: datetime
) -> StoredResponse | Claim:
    """Replay a known key, or reserve it for this request in the caller's transaction.

    Raises IdempotencyKeyReused for a key used with another fingerprint, and `IntegrityError`
    when a concurrent request reserved the same key and committed first (see the module doc).
    """
    row = store.get_key(session, user_id, key)
    if row is not None:
        if not is_expired(row.created_at, now):
            return replay(row, fp)
        store.delete_key(session, row.id)
    reserved = IdempotencyKeyRow(
        user_id=user_id,
        key=key,
        method=fp.method[:8],
        path=fp.path[:_PATH_COLUMN],
        request_hash=fp.request_hash,
        status_code=0,  # filled in by `complete` before the transaction commits
        response_body="",
        created_at=now,
    )
    return Claim(store.add_key(session, reserved))


def complete(session: Session, claim: Claim, status_code: int, body: str) -> None:
    """Store the response of a claimed key. Only successes are stored."""
    if not 200 <= status_code < 300:
        raise ValueError("only 2xx responses are stored for replay")
    claim.row.status_code = status_code
    claim.row.response_body = body
    session.flush()
