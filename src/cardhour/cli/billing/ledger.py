"""`cardhour admin ledger verify`: check the ledger on the server's own database, not over HTTP.

Runs where the server runs, against the database it is configured with (`--data-dir`'s SQLite
file or `CARDHOUR_DATABASE_URL`, resolved by `Settings` exactly as `cardhour up` does). It never
creates or migrates anything: a missing SQLite file, a database without cardhour's schema or one
at another migration than this version expects is an error (exit 2, one line).

It reads every account and transfer in one transaction: a consistent snapshot on PostgreSQL
(REPEATABLE READ) and on SQLite (the engine's `BEGIN IMMEDIATE`, which makes the server's writers
wait for the read, a few seconds at most), so postings made while it runs cannot show as a
mismatch. Exit codes: 0 balanced, 1 any violation, 2 the check could not run. Server-side modules
are imported inside the command so that other commands start fast.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError
from pydantic_settings import SettingsError

from cardhour.cli.common import JsonOption, invalid_setting, out
from cardhour.core.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from cardhour.services.billing.ledger import Verification

VIOLATION_EXIT = 1
DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="The server's data dir, whose cardhour.db is checked (default: CARDHOUR_DATA_DIR, "
        "else .cardhour); CARDHOUR_DATABASE_URL, when set, names the database instead.",
        show_default=False,
    ),
]


def verify(as_json: JsonOption = False, data_dir: DataDirOption = None) -> None:
    """Recompute every ledger account from its transfers; exit 1 on any violation."""
    engine = _open(_database_url(data_dir))
    try:
        _check_schema(engine)
        result = _verify_snapshot(engine)
    finally:
        engine.dispose()
    fields = dataclasses.asdict(result)
    if as_json:
        typer.echo(json.dumps(fields, indent=2, ensure_ascii=False, default=str))
    else:
        _print_summary(fields)
    if not result.balanced:
        raise typer.Exit(VIOLATION_EXIT)


def _database_url(data_dir: Path | None) -> str:
    from cardhour.settings import Settings

    try:
        settings = Settings(data_dir=data_dir) if data_dir is not None else Settings()
    except ValidationError as exc:
        raise invalid_setting(exc) from exc
    except SettingsError as exc:
        raise InvalidInput(str(exc)) from exc
    return settings.resolved_database_url()


def _open(url: str) -> Engine:
    """An engine on an existing database; never creates a SQLite file."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    from cardhour.db.engine import make_engine

    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise InvalidInput(f"cannot use database {url!r}: not a database URL") from exc
    if parsed.get_backend_name() == "sqlite":
        path = parsed.database
        if not path or path == ":memory:" or not Path(path).is_file():
            raise NotFound(f"no cardhour database at {path or url!r} (is --data-dir right?)")
    try:
        return make_engine(url)
    except (ArgumentError, NoSuchModuleError) as exc:
        raise InvalidInput(f"cannot use database {url!r}: {_first_line(exc)}") from exc


def _check_schema(engine: Engine) -> None:
    """The database must be at this version's newest migration (the server migrates at start)."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from sqlalchemy.exc import DBAPIError

    from cardhour.db.migrate import alembic_config

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    try:
        with engine.connect() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
    except DBAPIError as exc:
        raise InvalidInput(f"cannot open database: {_first_line(exc.orig or exc)}") from exc
    if current is None:
        raise NotFound("the database has no cardhour schema (start the server once to create it)")
    if current != head:
        raise InvalidInput(
            f"the database schema is at revision {current}, this cardhour expects {head} "
            "(run the matching cardhour version, or start the server to migrate)"
        )


def _verify_snapshot(engine: Engine) -> Verification:
    """`ledger.verify` in one transaction that sees a single snapshot; never commits."""
    from sqlalchemy.exc import DBAPIError
    from sqlalchemy.orm import Session

    from cardhour.db.snapshot import read_one_snapshot
    from cardhour.services.billing import ledger

    with Session(engine) as session:
        try:
            read_one_snapshot(session)
            return ledger.verify(session)
        except DBAPIError as exc:
            raise InvalidInput(f"cannot read the ledger: {_first_line(exc.orig or exc)}") from exc
        finally:
            session.rollback()  # a check writes nothing


def _print_summary(fields: dict[str, Any]) -> None:
    problems: list[str] = list(fields.pop("problems", []))
    balanced = fields.pop("balanced")
    out.print(f"ledger: {'balanced' if balanced else 'NOT BALANCED'}", markup=False)
    for name, value in fields.items():
        shown = value if isinstance(value, str | int) else json.dumps(value, default=str)
        out.print(f"  {name.replace('_', ' ')}: {shown}", markup=False)
    if not problems:
        out.print("  problems: none", markup=False)
        return
    out.print(f"  problems: {len(problems)}", markup=False)
    for problem in problems:
        out.print(f"    - {problem}", markup=False, soft_wrap=True)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{exc.__class__.__name__}: {lines[0] if lines else ''}"
