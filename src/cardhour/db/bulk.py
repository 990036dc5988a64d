"""Many-row writes in few statements: the metering pass posts thousands of transfers at once.

PostgreSQL gets one statement per call that reads its rows from `unnest` of one array per column
(SQLAlchemy compiles nothing row by row, the server plans once). SQLite, in process, gets one
compiled statement run with `executemany`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table, bindparam, insert, update
from sqlalchemy.orm import Session

from cardhour.db.locking import is_postgres


def _arrays(session: Session, table: Table, names: Sequence[str]) -> tuple[str, list[str]]:
    """`unnest(%(c0)s::TYPE[], …) AS v(name, …)` and the parameter names."""
    dialect = session.get_bind().dialect
    params = [f"c{i}" for i in range(len(names))]
    casts = ", ".join(
        f"%({p})b::{table.c[n].type.compile(dialect)}[]" for p, n in zip(params, names, strict=True)
    )
    return f"unnest({casts}) AS v({', '.join(names)})", params


def insert_rows(session: Session, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        return
    names = list(rows[0])
    if not is_postgres(session):
        session.connection().execute(insert(table), list(rows))
        return
    source, params = _arrays(session, table, names)
    sql = f"INSERT INTO {table.name} ({', '.join(names)}) SELECT {', '.join(names)} FROM {source}"
    args = {p: [r[n] for r in rows] for p, n in zip(params, names, strict=True)}
    _execute_binary(session, sql, args)


def update_rows(
    session: Session,
    table: Table,
    key: str,
    rows: Sequence[dict[str, Any]],
    increment: Sequence[str] = (),
) -> None:
    """For each row dict, set its columns (or add to them, for the names in `increment`) on the
    table row whose `key` column equals `row[key]`. Every dict has the same keys."""
    if not rows:
        return
    names = [name for name in rows[0] if name != key]
    if not is_postgres(session):
        stmt = (
            update(table)
            .where(table.c[key] == bindparam(f"_{key}"))
            .values(
                {
                    n: table.c[n] + bindparam(f"_{n}") if n in increment else bindparam(f"_{n}")
                    for n in names
                }
            )
        )
        params = [{f"_{n}": r[n] for n in (key, *names)} for r in rows]
        session.connection().execute(stmt, params)
        return
    columns = [key, *names]
    source, array_params = _arrays(session, table, columns)
    sets = ", ".join(
        f"{n} = {table.name}.{n} + v.{n}" if n in increment else f"{n} = v.{n}" for n in names
    )
    sql = f"UPDATE {table.name} SET {sets} FROM {source} WHERE {table.name}.{key} = v.{key}"
    args = {p: [r[n] for r in rows] for p, n in zip(array_params, columns, strict=True)}
    _execute_binary(session, sql, args)


def _execute_binary(session: Session, sql: str, args: dict[str, list[Any]]) -> None:
    """Run on the session's psycopg connection with binary parameters (arrays of ten thousand
    elements dump several times faster than as text)."""
    dbapi = session.connection().connection.dbapi_connection
    assert dbapi is not None
    cursor: Any = dbapi.cursor()
    try:
        cursor.execute(sql, args, binary=True)
    finally:
        cursor.close()
