"""The metered side of instance rows: what rating and charging read of an instance, and the
charge the metering pass writes back. Flush, never commit."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple, Protocol, cast

from sqlalchemy import Table, select
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from cardhour.db import bulk
from cardhour.db.locking import for_update
from cardhour.db.models import InstanceRow


class Rated(Protocol):
    """What rating and charging read of an instance: an `InstanceRow`, or a `RunningRow`."""

    @property
    def id(self) -> str: ...
    @property
    def owner_id(self) -> str: ...
    @property
    def gpu_model(self) -> str: ...
    @property
    def gpu_count(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def price_micros(self) -> int: ...
    @property
    def currency(self) -> str: ...
    @property
    def running_since(self) -> datetime | None: ...
    @property
    def billed_micros(self) -> int: ...
    @property
    def billed_closed_micros(self) -> int: ...
    @property
    def closed_frac(self) -> int: ...
    @property
    def no_gpu(self) -> bool: ...


class RunningRow(NamedTuple):
    """A running instance as the metering pass first reads it: a plain tuple, read-only (the
    pass reads every running instance, and ORM objects cost several times more to build and
    to read). The pass loads the ORM object only for rows it must change beyond their charge."""

    id: str
    owner_id: str
    gpu_model: str
    gpu_count: int
    status: str
    price_micros: int
    currency: str
    running_since: datetime | None
    billed_micros: int
    billed_closed_micros: int
    closed_frac: int
    data_centre: str | None
    plan: str
    plan_until: datetime | None
    charged_at: datetime | None
    no_gpu: bool


def lock_running(session: Session) -> list[RunningRow]:
    """Every `running` instance, locked until the transaction ends, as `list_in_status` orders
    them."""
    table = cast(Table, InstanceRow.__table__)
    stmt = select(*(table.c[name] for name in RunningRow._fields)).where(
        table.c.status == "running"
    )
    stmt = for_update(stmt.order_by(table.c.created_at, table.c.id))
    return [RunningRow(*row) for row in session.execute(stmt).all()]


def save_charges(session: Session, charges: Sequence[tuple[Rated, int, datetime]]) -> None:
    """Set (`billed_micros`, `charged_at`) of many rows in one statement, and on the ORM objects
    among them as saved values, so the session never sees them as changes to flush (the metering
    pass touches every running instance). A `RunningRow` is not changed: it is read-only."""
    bulk.update_rows(
        session,
        cast(Table, InstanceRow.__table__),
        "id",
        [{"id": r.id, "billed_micros": billed, "charged_at": at} for r, billed, at in charges],
    )
    for row, billed, at in charges:
        if isinstance(row, InstanceRow):
            set_committed_value(row, "billed_micros", billed)
            set_committed_value(row, "charged_at", at)
