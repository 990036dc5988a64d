"""Enrolment: an admin adds a host and gets a one-time join token; the host's agent trades it
for a host credential; an admin removes the host, revoking the credential.

Only SHA-256 digests of the token and the credential are stored (both 256-bit random secrets).
A token works once and until it expires; using it again, or after, is `Unauthorized` (401).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.errors import Conflict, Forbidden, InvalidInput, NotFound, Unauthorized
from cardhour.core.hosts import check_name
from cardhour.db.models import HostRow
from cardhour.services.ids import hash_secret, new_id, new_secret
from cardhour.store.hosts import hosts as store

TOKEN_PREFIX = "chj"  # join tokens
CREDENTIAL_PREFIX = "chh"  # host credentials


@dataclass(frozen=True)
class Enrolled:
    host: HostRow
    token: str
    expires_at: datetime


def add(
    session: Session,
    name: str,
    data_centre: str,
    data_centres: list[str],
    now: datetime,
    token_ttl: timedelta,
    ib_leaf: str | None = None,
    ib_spine: str | None = None,
) -> Enrolled:
    """A new host waiting for its agent, with its join token (shown once). A removed host's
    name can be added again (a new token; its old credential stays revoked). Conflict while a
    host of that name is enrolled."""
    check_name(name)
    if data_centre not in data_centres:
        raise InvalidInput(
            f"unknown data centre {data_centre!r}; the fleet file has: {', '.join(data_centres)}"
        )
    if ib_spine is not None and ib_leaf is None:
        raise InvalidInput("an InfiniBand spine needs a leaf (--ib-leaf)")
    token = new_secret(TOKEN_PREFIX)
    row = store.get_by_name(session, name, lock=True)
    if row is not None and row.removed_at is None:
        raise Conflict(f"host {name!r} is already enrolled; remove it first to enrol it again")
    if row is None:
        row = HostRow(id=new_id(), name=name, created_at=now, desired_version=0, standin=False)
        session.add(row)
    row.data_centre, row.ib_leaf, row.ib_spine = data_centre, ib_leaf, ib_spine
    row.token_hash, row.token_expires_at = hash_secret(token), now + token_ttl
    row.credential_hash = row.joined_at = row.last_seen_at = row.removed_at = None
    row.inventory = row.inventory_key = row.address = None
    session.flush()
    return Enrolled(row, token, now + token_ttl)


def join(session: Session, token: str, now: datetime) -> tuple[HostRow, str]:
    """Trade a join token for the host credential (shown once). Unauthorized when the token is
    unknown, used already, expired, or its host was removed."""
    row = store.get_by_token(session, hash_secret(token or ""))
    if row is None or row.removed_at is not None:
        raise Unauthorized("unknown or used join token: ask the operator for a new one")
    if row.token_expires_at is None or as_utc(row.token_expires_at) <= now:
        raise Unauthorized("join token expired: ask the operator for a new one")
    credential = new_secret(CREDENTIAL_PREFIX)
    row.token_hash = row.token_expires_at = None
    row.credential_hash = hash_secret(credential)
    row.joined_at = row.last_seen_at = now
    session.flush()
    return row, credential


def authenticate(session: Session, credential: str | None, host_name: str | None) -> HostRow:
    """The host this credential belongs to. Unauthorized for an unknown or revoked credential;
    Forbidden when the agent speaks for another host than its own (`host_name`)."""
    if not credential:
        raise Unauthorized("missing host credential: send 'Authorization: Bearer <credential>'")
    row = store.get_by_credential(session, hash_secret(credential))
    if row is None or row.removed_at is not None:
        raise Unauthorized("unknown or revoked host credential")
    if host_name is not None and host_name != row.name:
        raise Forbidden(f"this credential is host {row.name!r}'s, not {host_name!r}'s")
    return row


def remove(session: Session, name: str, now: datetime) -> HostRow:
    """Revoke the host's credential and take it out of the fleet. Instances on it are then
    on a lost node: the health reconciler places them again elsewhere. Idempotent."""
    row = store.get_by_name(session, name, lock=True)
    if row is None:
        raise NotFound(f"no host {name!r}")
    if row.removed_at is None:
        row.removed_at = now
        row.credential_hash = row.token_hash = row.token_expires_at = None
        session.flush()
    return row


def get(session: Session, name: str) -> HostRow:
    row = store.get_by_name(session, name)
    if row is None or row.removed_at is not None:
        raise NotFound(f"no host {name!r}")
    return row
