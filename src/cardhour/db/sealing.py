"""Renters' secrets sealed at rest: the columns that hold a renter's environment variables
(tokens, keys) are AES-256-GCM ciphertext in the database, so a dump of it, its backups or a
read-only SQL session show none of them without the key, which lives apart from it
(docs/dev/hosts.md, "Renters' variables at rest").

- `SealedText(purpose)` is a column type: the ORM and Core statements seal on write and open
  on read with the `Sealer` attached to the engine (`attach`); code above this module sees
  plain text. The purpose is the associated data: a value moved to another column does not
  open.
- A sealed value is `sealed:v1:<key id>:<base64url(nonce || ciphertext || tag)>`, the key id
  the first 8 hex digits of the key's SHA-256, so a value sealed under a previous key still
  opens while that key is listed (`Sealer(previous=...)`): rotation is a new key plus the old
  ones as previous, and `reseal` to rewrite every value under the new one (in two steps where
  several processes run: docs/dev/hosts.md).
- A value without the prefix (written before sealing existed) is read as it is, and `reseal`
  seals it.
- The key: `CARDHOUR_SEALING__KEY` (base64 of 32 bytes; the same for every process of one
  control plane), else `<data dir>/sealing.key`, made (mode 0600) on first start (`key_for`).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import (
    Dialect,
    Engine,
    MetaData,
    Text,
    bindparam,
    column,
    select,
    table,
    update,
)
from sqlalchemy.types import TypeDecorator

from cardhour.core.errors import CardhourError, InvalidInput

PREFIX = "sealed:v1:"
KEY_BYTES = 32
NONCE_BYTES = 12
KEY_FILE = "sealing.key"
_ATTR = "cardhour_sealer"


class SealingFailed(CardhourError):
    """A sealed value cannot be opened (no key for it, or not this column's), or no key is
    attached to seal with."""

    code = "sealing_failed"
    http_status = 500


def key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:8]


class Sealer:
    """Seals and opens text under `key`; opens under `previous` keys too. Thread-safe."""

    def __init__(self, key: bytes, previous: Sequence[bytes] = ()) -> None:
        for k in (key, *previous):
            if len(k) != KEY_BYTES:
                raise InvalidInput(f"a sealing key is {KEY_BYTES} bytes, not {len(k)}")
        self.key_id = key_id(key)
        self._current = AESGCM(key)
        self._by_id = {key_id(k): AESGCM(k) for k in (*previous, key)}

    def seal(self, text: str, purpose: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._current.encrypt(nonce, text.encode(), purpose.encode())
        body = base64.urlsafe_b64encode(nonce + sealed).decode()
        return f"{PREFIX}{self.key_id}:{body}"

    def open(self, value: str, purpose: str) -> str:
        """`value` opened; a value that is not sealed is returned as it is."""
        if not value.startswith(PREFIX):
            return value
        kid, _, body = value[len(PREFIX) :].partition(":")
        aead = self._by_id.get(kid)
        if aead is None:
            raise SealingFailed(f"a {purpose} value is sealed under key {kid}, which is not set")
        try:
            raw = base64.urlsafe_b64decode(body)
            return aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], purpose.encode()).decode()
        except (InvalidTag, binascii.Error, ValueError) as exc:
            raise SealingFailed(f"a {purpose} value does not open (altered or moved)") from exc


def attach(engine: Engine, sealer: Sealer) -> None:
    """Every `SealedText` column read or written through `engine` uses `sealer`."""
    setattr(engine.dialect, _ATTR, sealer)


def _sealer(dialect: Dialect, purpose: str) -> Sealer:
    found = getattr(dialect, _ATTR, None)
    if found is None:
        raise SealingFailed(f"no sealing key is attached to this engine (writing {purpose})")
    assert isinstance(found, Sealer)
    return found


class SealedText(TypeDecorator[str]):
    """Text sealed at rest under the engine's `Sealer` (module docstring)."""

    impl = Text
    cache_ok = True

    def __init__(self, purpose: str) -> None:
        super().__init__()
        self.purpose = purpose

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else _sealer(dialect, self.purpose).seal(value, self.purpose)

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        if value is None or not str(value).startswith(PREFIX):
            return value
        return _sealer(dialect, self.purpose).open(str(value), self.purpose)


def decode_key(text: str, where: str) -> bytes:
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except binascii.Error as exc:
        raise InvalidInput(f"{where}: not base64") from exc
    if len(key) != KEY_BYTES:
        raise InvalidInput(f"{where}: {len(key)} bytes, a sealing key is {KEY_BYTES}")
    return key


def key_for(data_dir: Path, configured: str | None) -> bytes:
    """The configured key, else the data dir's key file, made (0600, atomically: concurrent
    first starts agree on one; synced to disk) when missing. InvalidInput for a malformed
    key or one that cannot be read or made."""
    if configured:
        return decode_key(configured, "CARDHOUR_SEALING__KEY")
    try:
        return _key_file(data_dir / KEY_FILE)
    except OSError as exc:
        raise InvalidInput(f"cannot use the sealing key {data_dir / KEY_FILE}: {exc}") from exc


def _key_file(path: Path) -> bytes:
    data_dir = path.parent
    if not path.exists():
        tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}")
        descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(base64.b64encode(os.urandom(KEY_BYTES)).decode() + "\n")
            out.flush()
            os.fsync(out.fileno())  # on disk before any value sealed under it can be
        try:
            os.link(tmp, path)  # fails when another process made it first: its key wins
            folder = os.open(data_dir, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
        except FileExistsError:
            pass
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
    return decode_key(path.read_text(), str(path))


def sealed_columns(metadata: MetaData) -> list[tuple[str, tuple[str, ...], str]]:
    """(table, primary key columns, column) of every `SealedText` column of `metadata`."""
    found = []
    for name, tab in sorted(metadata.tables.items()):
        for col in tab.columns:
            if isinstance(col.type, SealedText):
                assert col.type.purpose == f"{name}.{col.name}", "a purpose names its column"
                found.append((name, tuple(k.name for k in tab.primary_key), col.name))
    return found


def reseal(engine: Engine, columns: Sequence[tuple[str, tuple[str, ...], str]]) -> int:
    """Seal under the current key every value of `columns` ((table, primary key columns,
    column), each a `SealedText` whose purpose is `table.column`) that is not yet: values
    written before sealing, or under a previous key. Compare-and-set per row (a value
    rewritten meanwhile is left to its writer, who sealed it); safe to run from several
    processes at once. The number of values sealed."""
    sealer = _sealer(engine.dialect, "reseal")
    done = 0
    for name, keys, col in columns:
        purpose = f"{name}.{col}"
        raw = table(name, *(column(k) for k in keys), column(col, Text))
        current = f"{PREFIX}{sealer.key_id}:%"
        query = select(*(raw.c[k] for k in keys), raw.c[col])
        query = query.where(raw.c[col].is_not(None), raw.c[col].not_like(current)).limit(500)
        same = [raw.c[k] == bindparam(f"k_{k}") for k in keys]
        change = update(raw).where(*same, raw.c[col] == bindparam("old"))
        change = change.values({col: bindparam("new")})
        while True:
            sealed = 0
            with engine.begin() as conn:
                rows = conn.execute(query).all()
                for row in rows:
                    value = row[-1]
                    new = sealer.seal(sealer.open(value, purpose), purpose)
                    params = {f"k_{k}": v for k, v in zip(keys, row[:-1], strict=True)}
                    params |= {"old": value, "new": new}
                    sealed += conn.execute(change, params).rowcount
            done += sealed
            if not rows or not sealed:  # nothing left, or every row rewritten by its writer
                break
    return done
