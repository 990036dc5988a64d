"""Queries on hosts and their containers. Flushes only; the caller's transaction commits."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Row, String, any_, bindparam, delete, func, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session
from sqlalchemy.sql import Executable

from cardhour.db.models import BRIEF_COLUMNS, HostContainerRow, HostDirectoryRow, HostRow


def get_by_name(session: Session, name: str, lock: bool = False) -> HostRow | None:
    query = select(HostRow).where(HostRow.name == name)
    return session.scalars(query.with_for_update() if lock else query).first()


def get_by_token(session: Session, token_hash: str) -> HostRow | None:
    query = select(HostRow).where(HostRow.token_hash == token_hash).with_for_update()
    return session.scalars(query).first()


def get_by_credential(session: Session, credential_hash: str) -> HostRow | None:
    query = select(HostRow).where(HostRow.credential_hash == credential_hash)
    return session.scalars(query).first()


def touch_statement() -> Executable:
    """Set `last_seen_at` (`:now`) of the enrolled host `:name` holding the credential whose
    hash is `:credential_hash`, if its last full report had digest `:digest` at its current
    desired version; returns (id, desired_version), or no row (and writes nothing). One
    statement, committed by itself: an idle host's heartbeat. (Its parameters are not named
    after columns: an UPDATE would set those.)"""
    return (
        update(HostRow)
        .where(
            HostRow.credential_hash == bindparam("credential_hash_"),
            HostRow.name == bindparam("name_"),
            HostRow.removed_at.is_(None),
            HostRow.report_digest == bindparam("digest_"),
            HostRow.reported_version == HostRow.desired_version,
        )
        .values(last_seen_at=bindparam("now_", type_=HostRow.__table__.c.last_seen_at.type))
        .returning(HostRow.id, HostRow.desired_version)
    )


def list_hosts(session: Session, joined_only: bool = False) -> list[HostRow]:
    query = select(HostRow).where(HostRow.removed_at.is_(None))
    if joined_only:
        query = query.where(HostRow.joined_at.is_not(None))
    return list(session.scalars(query.order_by(HostRow.name)))


#: a row of any columns
AnyRow = Row[*tuple[Any, ...]]
#: a host's columns but its inventory (`briefs`): what the host book keeps of it
#: (`BRIEF_COLUMNS`, whose changes move the host directory), its id and last heartbeat
BRIEF = (
    HostRow.id,
    HostRow.last_seen_at,
    *(getattr(HostRow, name) for name in BRIEF_COLUMNS),
)


def briefs(session: Session, ids: Iterable[str] | None = None) -> list[AnyRow]:
    """The `BRIEF` columns, not the inventory (read every second for a thousand hosts, the
    texts were most of it), by name: of the hosts `ids` (removed ones included), or of every
    joined host not removed."""
    query = select(*BRIEF)
    if ids is None:
        query = query.where(HostRow.removed_at.is_(None), HostRow.joined_at.is_not(None))
    else:
        query = query.where(HostRow.id.in_(sorted(set(ids))))
    return list(session.execute(query.order_by(HostRow.name)).all())


def directory_version(session: Session) -> int:
    """The host directory's version (`HostDirectoryRow`): one primary-key read."""
    return int(session.execute(select(HostDirectoryRow.version)).scalar_one())


def briefs_since(session: Session, version: int) -> list[AnyRow]:
    """The `BRIEF` columns of every host (removed or not yet joined included) whose brief
    changed after directory version `version`."""
    query = select(*BRIEF).where(HostRow.brief_version > version)
    return list(session.execute(query).all())


def silent(session: Session, seen_before: datetime) -> set[str]:
    """Ids of the joined hosts, not removed, whose agent last reported before `seen_before`
    (an index range: none, while every agent reports)."""
    query = select(HostRow.id).where(
        HostRow.last_seen_at < seen_before,
        HostRow.removed_at.is_(None),
        HostRow.joined_at.is_not(None),
    )
    return set(session.scalars(query))


def inventories(session: Session, ids: Iterable[str]) -> dict[str, str | None]:
    query = select(HostRow.id, HostRow.inventory).where(HostRow.id.in_(sorted(set(ids))))
    return {host_id: text for host_id, text in session.execute(query)}


def names_by_id(session: Session) -> dict[str, str]:
    return dict(session.execute(select(HostRow.id, HostRow.name)).all())


def versions(session: Session, host_ids: Iterable[str]) -> dict[str, int]:
    """Asked ten times a second for every waiting agent's host: on PostgreSQL one array
    parameter, so the statement text is the same whatever the hosts (prepared once by psycopg;
    an IN list of 1,000 binds was rendered and parsed anew each time)."""
    ids = list(host_ids)
    if not ids:
        return {}
    query = select(HostRow.id, HostRow.desired_version)
    if session.get_bind().dialect.name == "postgresql":
        query = query.where(HostRow.id == any_(bindparam("ids", ids, type_=ARRAY(String))))
    else:
        query = query.where(HostRow.id.in_(ids))
    return dict(session.execute(query).all())


def bump_versions(session: Session, host_ids: Iterable[str]) -> None:
    ids = sorted(set(host_ids))
    if ids:
        session.execute(
            update(HostRow)
            .where(HostRow.id.in_(ids))
            .values(desired_version=HostRow.desired_version + 1)
        )


def containers_of_host(session: Session, host_id: str) -> list[HostContainerRow]:
    query = select(HostContainerRow).where(HostContainerRow.host_id == host_id)
    return list(session.scalars(query.order_by(HostContainerRow.workload)))


def containers_of_workload(
    session: Session, workload: str, lock: bool = False
) -> list[HostContainerRow]:
    query = select(HostContainerRow).where(HostContainerRow.workload == workload)
    query = query.order_by(HostContainerRow.host_id)
    return list(session.scalars(query.with_for_update() if lock else query))


def container_counts(session: Session) -> dict[str, int]:
    """Wanted containers per host id."""
    query = (
        select(HostContainerRow.host_id, func.count())
        .where(HostContainerRow.wanted.is_(True))
        .group_by(HostContainerRow.host_id)
    )
    return dict(session.execute(query).all())


def delete_container(session: Session, host_id: str, workload: str) -> None:
    session.execute(
        delete(HostContainerRow).where(
            HostContainerRow.host_id == host_id, HostContainerRow.workload == workload
        )
    )


def wanted_workloads(session: Session, prefix: str) -> list[str]:
    """The workloads whose name starts with `prefix` that are wanted on some host."""
    query = (
        select(HostContainerRow.workload)
        .where(HostContainerRow.workload.startswith(prefix, autoescape=True))
        .where(HostContainerRow.wanted.is_(True))
        .distinct()
    )
    return sorted(session.scalars(query))
