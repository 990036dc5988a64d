"""GPU servers run by host agents, and the containers the control plane wants on them.

A host is enrolled by an admin (a one-time join token, only its SHA-256 kept), joins when its
agent trades the token for a host credential (only its SHA-256 kept), then reports its
inventory and containers on every heartbeat. `desired_version` moves whenever the containers
wanted on it change: an agent waiting for work wakes on it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Connection,
    ForeignKey,
    Integer,
    String,
    Text,
    event,
    inspect,
    update,
)
from sqlalchemy.orm import Mapped, Session, SessionTransaction, mapped_column, object_session

from cardhour.db.models.base import TS, Base
from cardhour.db.sealing import SealedText


class HostRow(Base):
    __tablename__ = "hosts"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)  # the node id it serves as
    data_centre: Mapped[str] = mapped_column(String(64))
    ib_leaf: Mapped[str | None] = mapped_column(String(64), nullable=True)
    ib_spine: Mapped[str | None] = mapped_column(String(64), nullable=True)
    token_hash: Mapped[str | None] = mapped_column(String(64), nullable=True, unique=True)
    token_expires_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    credential_hash: Mapped[str | None] = mapped_column(String(64), nullable=True, unique=True)
    address: Mapped[str | None] = mapped_column(String(255), nullable=True)  # published ports
    inventory: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON, as reported
    #: `core.hosts.inventory_key(inventory)`: who keeps a parsed inventory reads only this
    inventory_key: Mapped[str | None] = mapped_column(String(16), nullable=True)
    runtime: Mapped[str | None] = mapped_column(String(32), nullable=True)  # podman | docker
    standin: Mapped[bool] = mapped_column(Boolean, default=False)  # stand-in GPUs (test machines)
    desired_version: Mapped[int] = mapped_column(Integer, default=0)
    #: the last full report's digest and the `desired_version` it was applied at: a report
    #: with the same digest at the same version changes nothing but `last_seen_at`
    report_digest: Mapped[str | None] = mapped_column(String(64), nullable=True)
    reported_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(TS)
    joined_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)
    last_seen_at: Mapped[datetime | None] = mapped_column(TS, nullable=True, index=True)
    removed_at: Mapped[datetime | None] = mapped_column(TS, nullable=True)  # credential revoked
    #: the directory's version at the last change of a `BRIEF_COLUMNS` column (set on flush)
    brief_version: Mapped[int] = mapped_column(
        BigInteger, default=0, server_default="0", index=True
    )


#: what the host book keeps of each host between ticks: a change of any moves the directory
BRIEF_COLUMNS = (
    "name",
    "data_centre",
    "ib_leaf",
    "ib_spine",
    "address",
    "standin",
    "joined_at",
    "removed_at",
    "inventory_key",
)


class HostDirectoryRow(Base):
    """One row (id 1): the host directory's version, moved by every transaction that changes a
    host's `BRIEF_COLUMNS` through the ORM (a host enrolled, joined, moved or removed, or
    reporting another inventory, address or engine; never a heartbeat), right before it
    commits; the changed hosts' `brief_version` takes the new value. Its row lock makes those
    commits happen in version order, so a reader that saw version V and then reads the hosts
    with `brief_version > V` misses none; taken at the commit, it is held for the commit only
    (a thousand hosts joining at once do not queue behind each other's whole report)."""

    __tablename__ = "host_directory"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger)


_CHANGED = "cardhour.hosts_brief_changed"  # Session.info: ids of hosts whose brief changed


@event.listens_for(HostRow, "before_insert")
@event.listens_for(HostRow, "before_update")
def _note_brief_change(_mapper: Any, _connection: Connection, target: HostRow) -> None:
    state = inspect(target)
    if state.persistent and not any(
        state.attrs[name].history.has_changes() for name in BRIEF_COLUMNS
    ):
        return
    session = object_session(target)
    if session is not None:
        session.info.setdefault(_CHANGED, set()).add(target.id)


@event.listens_for(Session, "before_commit")
def _directory_moves(session: Session) -> None:
    if session.in_nested_transaction():
        return  # a savepoint released: the transaction around it commits later
    session.flush()  # what is still pending notes its changes first
    changed = session.info.pop(_CHANGED, None)
    if not changed:
        return
    moved = (
        update(HostDirectoryRow)
        .where(HostDirectoryRow.id == 1)
        .values(version=HostDirectoryRow.version + 1)
        .returning(HostDirectoryRow.version)
    )
    version = session.execute(moved).scalar_one()
    ids = sorted(changed)
    session.execute(update(HostRow).where(HostRow.id.in_(ids)).values(brief_version=version))


@event.listens_for(Session, "after_transaction_end")
def _forget_brief_changes(session: Session, transaction: SessionTransaction) -> None:
    """The outermost transaction ended (rolled back, or closed): what it noted is moot. A
    savepoint rolled back keeps the notes (a host noted for nothing is only read again)."""
    if transaction.parent is None:
        session.info.pop(_CHANGED, None)


class HostContainerRow(Base):
    """One workload's container on one host: what is wanted (`spec`, `wanted`) and what the
    agent last reported (`state`, `report`). Unwanted rows go once the agent reports them gone."""

    __tablename__ = "host_containers"

    host_id: Mapped[str] = mapped_column(ForeignKey("hosts.id"), primary_key=True)
    workload: Mapped[str] = mapped_column(String(64), primary_key=True)  # ch-<instance>-<attempt>
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    spec: Mapped[str] = mapped_column(SealedText("host_containers.spec"))  # JSON: what runs
    wanted: Mapped[bool] = mapped_column(Boolean, default=True)
    state: Mapped[str] = mapped_column(String(16), default="pending")
    report: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON, as reported
    created_at: Mapped[datetime] = mapped_column(TS)
    updated_at: Mapped[datetime] = mapped_column(TS)
