"""SSH public keys of an account: add (validated, fingerprinted), list, remove, and the
`authorized_keys` text every new instance of the owner gets.

Only public keys are accepted (`core.sshkeys`); a pasted private key is refused and never
stored or logged. A key is unique per account by fingerprint, and so is its name.
"""

from __future__ import annotations

import re
from datetime import datetime

from sqlalchemy.orm import Session

from cardhour.core import sshkeys
from cardhour.core.errors import Conflict, InvalidInput, NotFound
from cardhour.db.models import SshKeyRow, UserRow
from cardhour.services.ids import new_id
from cardhour.store.accounts import ssh_keys as store

MAX_KEYS = 50
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")


def default_name(key: sshkeys.PublicKey) -> str:
    """The key's comment when it makes a valid name, else `<type>-<fingerprint prefix>`."""
    if _NAME.fullmatch(key.comment):
        return key.comment
    tail = key.fingerprint.removeprefix("SHA256:")[:8].replace("/", "_").replace("+", "-")
    return f"{key.label.lower()}-{tail}"


def add(session: Session, user: UserRow, text: str, name: str | None, now: datetime) -> SshKeyRow:
    """Store one public key for `user`. InvalidInput for anything but one accepted public key
    or a bad name; Conflict when the account already has this key or this name."""
    key = sshkeys.parse(text)
    name = default_name(key) if name is None or not name.strip() else name.strip()
    if not _NAME.fullmatch(name):
        raise InvalidInput(
            f"bad key name {name!r}: 1-64 letters, digits and . _ @ + -, starting with a "
            "letter or digit"
        )
    for row in store.list_owned(session, user.id):
        if row.fingerprint == key.fingerprint:
            raise Conflict(
                f"this key is already on your account as {row.name!r} ({row.fingerprint})",
                fingerprint=row.fingerprint,
            )
        if row.name == name:
            raise Conflict(f"you already have a key named {name!r}: pick another --name")
    if store.count_owned(session, user.id) >= MAX_KEYS:
        raise Conflict(f"an account holds at most {MAX_KEYS} SSH keys: remove one first")
    return store.add(
        session,
        SshKeyRow(
            id=new_id(),
            owner_id=user.id,
            name=name,
            key_type=key.type,
            bits=key.bits,
            public_key=key.line,
            fingerprint=key.fingerprint,
            created_at=now,
        ),
    )


def list_for(session: Session, user: UserRow) -> list[SshKeyRow]:
    return store.list_owned(session, user.id)


def remove(session: Session, user: UserRow, ident: str) -> SshKeyRow:
    """Remove the user's key named by id, name or fingerprint. Instances already running keep
    the keys they were given; new ones no longer get it."""
    row = store.find_owned(session, user.id, ident)
    if row is None:
        raise NotFound(f"no SSH key {ident!r} on your account")
    store.delete(session, row)
    return row


def authorized_keys(session: Session, owner_id: str, extra: str | None = None) -> str | None:
    """The `authorized_keys` text for a new instance of `owner_id`: every key of the account,
    then `extra` (a key given with the launch, already checked) unless it is one of them.
    None when there is no key at all."""
    lines = store.public_keys_of(session, owner_id)
    if extra is not None:
        extra_key = sshkeys.parse(extra)
        known = {sshkeys.parse(line).fingerprint for line in lines}
        if extra_key.fingerprint not in known:
            lines.append(extra_key.line)
    return "\n".join(lines) + "\n" if lines else None
