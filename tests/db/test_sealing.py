"""`db.sealing`: AES-256-GCM values that open only under their key and for their column, the key
file made once (0600) and shared, and no silent clear text when no key is attached."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, create_engine, insert, select, text
from sqlalchemy.exc import StatementError

from cardhour.core.errors import InvalidInput
from cardhour.db.sealing import (
    PREFIX,
    SealedText,
    Sealer,
    SealingFailed,
    attach,
    key_for,
    reseal,
    sealed_columns,
)


def _key() -> bytes:
    return os.urandom(32)


def test_a_value_opens_under_its_key_for_its_column_only() -> None:
    key = _key()
    sealer = Sealer(key)
    sealed = sealer.seal("HF_TOKEN=abc", "instances.env")
    assert sealed.startswith(PREFIX) and "abc" not in sealed
    assert sealed != sealer.seal("HF_TOKEN=abc", "instances.env")  # a fresh nonce each time
    assert sealer.open(sealed, "instances.env") == "HF_TOKEN=abc"
    with pytest.raises(SealingFailed, match="does not open"):
        sealer.open(sealed, "host_containers.spec")  # moved to another column
    altered = sealed[:-6] + ("A" if sealed[-6] != "A" else "B") + sealed[-5:]
    with pytest.raises(SealingFailed, match="does not open"):
        sealer.open(altered, "instances.env")
    with pytest.raises(SealingFailed, match="not set"):
        Sealer(_key()).open(sealed, "instances.env")
    assert Sealer(_key(), previous=[key]).open(sealed, "instances.env") == "HF_TOKEN=abc"
    assert sealer.open('{"A": "1"}', "instances.env") == '{"A": "1"}'  # from before sealing
    with pytest.raises(InvalidInput, match="32 bytes"):
        Sealer(b"short")


def test_the_key_file_is_made_once_private_and_a_given_key_is_checked(tmp_path: Path) -> None:
    first = key_for(tmp_path, None)
    assert key_for(tmp_path, None) == first and len(first) == 32
    assert stat.S_IMODE((tmp_path / "sealing.key").stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["sealing.key"]
    given = base64.b64encode(_key()).decode()
    assert key_for(tmp_path, given) == base64.b64decode(given)
    with pytest.raises(InvalidInput, match="not base64"):
        key_for(tmp_path, "not a key!")
    with pytest.raises(InvalidInput, match="16 bytes"):
        key_for(tmp_path, base64.b64encode(b"x" * 16).decode())


def test_an_engine_without_a_key_refuses_to_write_and_reseal_seals_what_is_left(
    tmp_path: Path,
) -> None:
    metadata = MetaData()
    notes = Table(
        "notes",
        metadata,
        Column("id", Integer, primary_key=True),
        Column("body", SealedText("notes.body")),
    )
    assert sealed_columns(metadata) == [("notes", ("id",), "body")]
    engine = create_engine(f"sqlite:///{tmp_path / 'x.db'}")
    metadata.create_all(engine)
    with pytest.raises(StatementError, match="no sealing key"), engine.begin() as conn:
        conn.execute(insert(notes).values(id=1, body="secret"))
    with engine.begin() as conn:  # as written before sealing
        conn.execute(text("INSERT INTO notes (id, body) VALUES (1, 'old'), (2, NULL)"))
    attach(engine, Sealer(_key()))
    with engine.begin() as conn:
        conn.execute(insert(notes).values(id=3, body="new"))
    assert reseal(engine, sealed_columns(metadata)) == 1
    assert reseal(engine, sealed_columns(metadata)) == 0
    with engine.connect() as conn:
        raw = dict(conn.execute(text("SELECT id, body FROM notes")).all())
        assert raw[2] is None and all(raw[i].startswith(PREFIX) for i in (1, 3))
        assert dict(conn.execute(select(notes.c.id, notes.c.body)).all()) == {
            1: "old",
            2: None,
            3: "new",
        }
