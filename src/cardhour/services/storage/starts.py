"""Starting an instance whose stop kept its container disk on a host (docs/dev/storage.md).

The start goes where the disk is. When that host's GPUs are taken, the owner chooses
(`MODES`): `wait` in the queue for them (no readiness SLA then: the owner chose that host
over the others); `no_gpu`, run from the disk now with no GPU (half a CPU, 512 MB) at the
storage offer's price per hour (`Storage.no_gpu_price`), to reach the data, while that host is
up; or `move`, copy the disk to another host of the data centre with the GPUs free (through
its shared storage path; the copy is not billed, the estimate comes from
`Storage.copy_seconds`, and the SLA's window opens when the estimated copy is done), where the
instance keeps its name, hostname and ssh alias. `auto` (the default) starts on the
disk's host when its GPUs are free and otherwise answers with the choices
(`StartChoiceNeeded`, HTTP 409 `start_choice_needed`), starting nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core.catalog import Catalog
from cardhour.core.errors import Conflict, InvalidInput, InvalidTransition
from cardhour.core.money import Money
from cardhour.core.states import InstanceStatus, Plan
from cardhour.db.models import InstanceRow, UserRow
from cardhour.scheduler import Pending, Scheduler
from cardhour.services.compute import fleet, instances, placement
from cardhour.services.storage import volumes
from cardhour.store.compute import nodes as node_store
from cardhour.store.storage import volumes as volume_store

AUTO, WAIT, NO_GPU, MOVE = "auto", "wait", "no_gpu", "move"
MODES = (AUTO, WAIT, NO_GPU, MOVE)


class StartChoiceNeeded(Conflict):
    """The host the instance's disk is kept on has not its GPUs free: the owner chooses."""

    code = "start_choice_needed"


@dataclass(frozen=True)
class StartChoices:
    """What a start of a stopped instance can do now. `disk_host` None: it kept no disk (a
    start goes wherever the scheduler places it; no choice to make)."""

    disk_host: str | None
    disk_gb: int | None
    gpus_free: bool  # on the disk's host, now
    no_gpu_price: Money  # per hour, CPU only
    host_up: bool  # the disk's host takes work (a start without GPUs needs it)
    move_to: str | None  # a host of its data centre with its GPUs free now
    copy_seconds: int | None  # the move's estimate
    move_refused: str | None  # why there is no move (None when there is one)

    def as_details(self) -> dict[str, object]:
        """The choices as the API's error details and read model give them."""
        return {
            "disk_host": self.disk_host,
            "disk_gb": self.disk_gb,
            "gpus_free": self.gpus_free,
            "choices": [
                {"mode": WAIT, "detail": f"wait in the queue for the GPUs of {self.disk_host}"},
                {
                    "mode": NO_GPU,
                    "detail": "run from the disk now without GPUs (half a CPU, 512 MB)"
                    if self.host_up
                    else f"{self.disk_host} is not up",
                    "available": self.host_up,
                    "price_per_hour": self.no_gpu_price.format(),
                    "currency": self.no_gpu_price.currency,
                },
                {
                    "mode": MOVE,
                    "detail": self.move_refused
                    or f"copy the disk to {self.move_to} (~{self.copy_seconds} s, not billed)",
                    "available": self.move_to is not None,
                    "to": self.move_to,
                    "copy_seconds": self.copy_seconds,
                },
            ],
        }


def choices(session: Session, catalog: Catalog, row: InstanceRow) -> StartChoices:
    """The choices of `row` now (read only: nothing is held)."""
    dc = row.placement_dc or row.data_centre or ""
    price = catalog.storage.no_gpu_price
    disk_host = row.disk_host
    if disk_host is None:
        return StartChoices(None, None, True, price, False, None, None, "it kept no disk")
    disks = volume_store.kept_disks_of(session, row.id)
    size = disks[0].size_gb if disks else None
    view = fleet.load(session, catalog)
    engine, shapes = Scheduler("bestfit"), placement.node_shapes(view.state)

    def fits(node: str) -> bool:
        request = placement.to_request(
            shapes, row.id, row.gpu_model, row.gpu_count, dc, row.bare_metal, node
        )
        if isinstance(request, Pending):
            return False
        return not isinstance(engine.place(view.state, request, look_ahead=False), Pending)

    free_here = fits(disk_host)
    target, refused = None, None
    if catalog.storage.shared_path(dc) is None:
        refused = f"data centre {dc} declares no shared storage path to copy the disk through"
    elif volumes.pins_to_host(session, row):
        refused = "it mounts a volume kept on its host: it cannot move from that host"
    else:
        others = sorted(
            n for n, spec in view.specs.items()
            if n != disk_host and spec.data_centre == dc and spec.gpu_model == row.gpu_model
        )  # fmt: skip
        target = next((n for n in others if fits(n)), None)
        if target is None:
            refused = f"no other host of {dc} has {row.gpu_count} × {row.gpu_model} free now"
    seconds = catalog.storage.copy_seconds(size or 1) if target is not None else None
    up = host_up(session, disk_host)
    return StartChoices(disk_host, size, free_here, price, up, target, seconds, refused)


def start(
    session: Session,
    catalog: Catalog,
    user: UserRow,
    id_or_name: str,
    now: datetime,
    mode: str = AUTO,
) -> InstanceRow:
    """Start a stopped instance as `mode` says (`MODES`); idempotent for one already started.
    InvalidInput for an unknown mode; StartChoiceNeeded (`auto`) and Conflict (`move` with no
    host to move to) start nothing."""
    if mode not in MODES:
        raise InvalidInput(f"unknown start mode {mode!r}: one of {', '.join(MODES)}")
    row = instances.get(session, user, id_or_name, lock=True)
    disk_host = row.disk_host
    if row.status != InstanceStatus.STOPPED.value or disk_host is None:
        if mode in (NO_GPU, MOVE) and row.status == InstanceStatus.STOPPED.value:
            raise InvalidTransition(f"instance {row.name} kept no disk: start it without a mode")
        return instances.start(session, user, id_or_name, now)
    if mode in (AUTO, MOVE):
        found = choices(session, catalog, row)
        if mode == AUTO and not found.gpus_free:
            raise StartChoiceNeeded(
                f"the GPUs of {found.disk_host}, where the disk of {row.name} is kept, are "
                "taken: choose to wait, to start without GPUs or to move",
                **found.as_details(),
            )
        if mode == MOVE:
            if found.move_to is None or found.copy_seconds is None:
                raise Conflict(f"{row.name} cannot move now: {found.move_refused}")
            row = instances.start(session, user, id_or_name, now, move_to=found.move_to)
            # the readiness SLA's window opens once the estimated copy is done
            row.requested_at = now + timedelta(seconds=found.copy_seconds)
            return row
    if mode == NO_GPU:
        if row.plan == Plan.MONTHLY.value and row.plan_until is None:
            raise InvalidTransition(f"{row.name}'s monthly plan has not begun: start it with GPUs")
        if not host_up(session, disk_host):
            raise Conflict(f"{disk_host}, where the disk of {row.name} is kept, is not up")
        price = catalog.storage.no_gpu_price
        return instances.start(session, user, id_or_name, now, no_gpu_price=price)
    row = instances.start(session, user, id_or_name, now)
    if mode == WAIT:  # waiting for one host's GPUs, chosen over the others: no SLA clock
        row.requested_at = None
    return row


def host_up(session: Session, host: str) -> bool:
    """Whether `host` is in the fleet and takes work (reporting, not drained)."""
    return any(node.schedulable for node in node_store.get_nodes(session, [host]))
