"""Hosts as an operator reads them (`cardhour admin hosts list`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.gpus import GpuModel
from cardhour.core.hosts import gpu_model
from cardhour.db.models import HostRow
from cardhour.store.hosts import hosts as store


@dataclass(frozen=True)
class HostView:
    row: HostRow
    state: str  # waiting | ready | lost | removed
    lost_reason: str | None
    gpu: str | None
    gpu_names: list[str]
    containers: int


def state_of(row: HostRow, now: datetime, lost_after: timedelta) -> tuple[str, str | None]:
    if row.removed_at is not None:
        return "removed", "removed by the operator"
    if row.joined_at is None:
        return "waiting", None
    if row.last_seen_at is None or now - as_utc(row.last_seen_at) > lost_after:
        return "lost", f"no heartbeat for over {lost_after.total_seconds():.0f} s"
    return "ready", None


def view(
    row: HostRow, now: datetime, lost_after: timedelta, models: list[GpuModel], count: int
) -> HostView:
    state, why = state_of(row, now, lost_after)
    inventory = json.loads(row.inventory) if row.inventory else {}
    names = [str(g.get("name", "")) for g in inventory.get("gpus", [])]
    model = gpu_model(names, models)
    return HostView(row, state, why, model.id if model else None, names, count)


def list_views(
    session: Session, now: datetime, lost_after: timedelta, models: list[GpuModel]
) -> list[HostView]:
    counts = store.container_counts(session)
    return [
        view(row, now, lost_after, models, counts.get(row.id, 0))
        for row in store.list_hosts(session)
    ]
