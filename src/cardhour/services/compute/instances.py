"""Instances: the intent side (launch, stop, start, terminate) and what they hold.

The API calls these and commits; nothing here calls a backend. Reconcilers converge. State
changes go through `lifecycle.switch_status`.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from cardhour.core.catalog import Catalog
from cardhour.core.clock import as_utc
from cardhour.core.errors import (
    Conflict,
    InsufficientBalance,
    InvalidInput,
    InvalidTransition,
    NoCapacity,
    NotFound,
)
from cardhour.core.gpus import validate_gpu_count
from cardhour.core.money import Money
from cardhour.core.states import InstanceStatus, Plan
from cardhour.core.storage import volumes as core_volumes
from cardhour.db.models import AllocationRow, InstanceRow, UserRow
from cardhour.services.accounts import ssh_keys
from cardhour.services.billing import metering, pricing, wallet
from cardhour.services.compute import capacity, placement, workload
from cardhour.services.compute.lifecycle import COMMITTED, end_plan_if_over, switch_status
from cardhour.services.ids import new_id
from cardhour.services.storage import volumes
from cardhour.store.compute import instances as store
from cardhour.store.compute import nodes as node_store

S = InstanceStatus
_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
AT_EXPIRY = ("stop", "on_demand")


@dataclass(frozen=True, kw_only=True)
class LaunchRequest:
    """What a launch asks for, by field name (the API builds it from `InstanceCreate`'s fields,
    which carry the same names)."""

    gpu: str
    count: int
    name: str | None = None
    image: str | None = None
    ssh_key: str | None = None
    plan: str = Plan.ON_DEMAND.value
    movable: bool = False  # the operator may move it to defragment the fleet
    quote_id: str | None = None  # a valid quote caps the price of the first placement
    at_expiry: str = "stop"  # monthly plan: "stop" or "on_demand" when the 30 days end
    nodes: int = 1  # > 1: a cluster of whole nodes, `count` GPUs each
    weights: str | None = None  # model weights to mount (placement prefers where they are)
    bare_metal: bool = False  # whole nodes held exclusively
    command: str | None = None  # the renter's workload (`workload.checked`): run by `sh -c`
    env: Mapping[str, str] = field(default_factory=dict)  # environment variables, in order
    ports: Sequence[int] = ()  # container ports to publish
    volumes: Sequence[str | Mapping[str, str]] = ()  # the owner's volumes: `NAME:/path`
    data_centre: str | None = None  # where it must run (None: anywhere, or its volumes')


def _validate_name(name: str | None, model_id: str) -> str:
    if name is None or name == "":
        return f"{model_id.lower()}-{secrets.token_hex(3)}"
    if not _NAME.fullmatch(name):
        raise InvalidInput(
            f"bad instance name {name!r}: 1-63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return name


MAX_CLUSTER_NODES = 128


def cluster_count(
    shapes: dict[str, placement.NodeShape], model_id: str, per_node: int, nodes: int
) -> int:
    """All GPUs of a cluster of `nodes` whole nodes; InvalidInput unless `per_node` is a node."""
    if not 1 <= nodes <= MAX_CLUSTER_NODES:
        raise InvalidInput(f"a cluster has 1 to {MAX_CLUSTER_NODES} nodes, not {nodes}")
    shape = shapes.get(model_id)
    if shape is None:
        raise NoCapacity(f"no {model_id} node in this fleet")
    if per_node != shape.gpus:
        raise InvalidInput(
            f"a cluster takes whole nodes: ask for {model_id}:{shape.gpus} per node "
            f"(got {per_node}), e.g. --gpu {model_id}:{shape.gpus} --nodes {nodes}"
        )
    return validate_gpu_count(per_node * nodes)


def committed_hour(session: Session, owner_id: str) -> Money | None:
    """One hour of every on-demand instance of the owner that is running or about to run."""
    total: Money | None = None
    for row in store.list_owned(session, owner_id):
        if S(row.status) in COMMITTED and row.plan == Plan.ON_DEMAND.value:
            cost = metering.hourly_cost(row)
            total = cost if total is None else total + cost
    return total


def _hold(
    session: Session,
    row: InstanceRow,
    amount: Money,
    what: str,
    now: datetime,
    usage_price: Money | None = None,
    new: bool = False,
) -> int:
    """Set `amount` aside for the instance; InsufficientBalance names what it was for.
    `usage_price`: the hold is for on-demand usage at that price (grant hours count toward it).
    `new`: the instance was created in this transaction. Returns what the hold then holds."""
    try:
        return wallet.place_hold(
            session, row, amount, now, usage_price.micros if usage_price else 0, new=new
        )
    except InsufficientBalance as exc:
        raise InsufficientBalance(
            f"available balance {exc.details.get('available')} {amount.currency} does not "
            f"cover {what} ({amount.format()} {amount.currency})",
            needed=amount.format(),
            available=exc.details.get("available"),
        ) from None


#: The reason of the event a launch writes (and `views.launched` shows without reading it).
CREATED = "created"


@dataclass(frozen=True)
class Launched:
    """A launch's instance and what its hold holds once placed (micros of its currency)."""

    row: InstanceRow
    held: int
    volumes: list[tuple[str, str]] = field(default_factory=list)  # (name, mount path)


def create(
    session: Session,
    catalog: Catalog,
    user: UserRow,
    req: LaunchRequest,
    now: datetime,
) -> InstanceRow:
    """Validate, price, check the balance covers an hour, and record a `pending` instance
    (`launch`'s instance)."""
    return launch(session, catalog, user, req, now).row


def launch(
    session: Session,
    catalog: Catalog,
    user: UserRow,
    req: LaunchRequest,
    now: datetime,
) -> Launched:
    """Validate, price, check the balance covers an hour, and record a `pending` instance.

    Raises NoCapacity if the request could not be placed even on an all-free fleet (answered
    by the fleet's capacity summary, `capacity.current`)."""
    model = catalog.model(req.gpu)
    count = validate_gpu_count(req.count)
    if req.plan not in (Plan.ON_DEMAND.value, Plan.MONTHLY.value):
        raise InvalidInput(f"unknown plan {req.plan!r}; plans: on_demand, monthly")
    if req.at_expiry not in AT_EXPIRY:
        raise InvalidInput(f"unknown at_expiry {req.at_expiry!r}; choose stop or on_demand")
    work = workload.checked(catalog, req.image, req.command, req.env, req.ports)
    weights = catalog.model_weights(req.weights).id if req.weights else None
    extra_key = req.ssh_key if req.ssh_key is not None and req.ssh_key.strip() else None
    ssh_key = ssh_keys.authorized_keys(session, user.id, extra_key)
    name = _validate_name(req.name, model.id)
    mounts = core_volumes.parse_mounts(list(req.volumes))
    if mounts and req.nodes != 1:
        raise InvalidInput(
            "volumes: a volume is mounted read-write by one node; a cluster's nodes cannot "
            "share it",
            field="volumes",
        )
    dc = volumes.where(session, catalog, user, mounts, req.data_centre)
    fleet = capacity.current(session)  # the inventory's summary, not the fleet itself
    shapes = fleet.shapes
    if req.nodes != 1:
        count = cluster_count(shapes, model.id, count, req.nodes)
    size = shapes[model.id].gpus if model.id in shapes else None
    if req.bare_metal and size is not None and count % size:
        raise InvalidInput(
            f"bare metal takes whole nodes: ask for {model.id}:{size} (or --nodes), not {count}"
        )
    fleet.check(model.id, count, req.bare_metal, dc)
    price = pricing.launch_price(pricing.history(session, catalog), model.id, req.plan, now)
    quoted: Money | None = None
    if req.quote_id:
        quote = pricing.honoured_quote(session, user, req.quote_id, model.id, count, req.plan, now)
        quoted = Money(quote.price_micros, quote.currency)
        price = min(price, quoted)
    elif req.plan == Plan.MONTHLY.value:
        quoted = price  # what is held is the most the plan will cost
    monthly = req.plan == Plan.MONTHLY.value
    if store.name_taken(session, user.id, name):  # this user's launches, so check names here
        raise Conflict(f"you already have an instance named {name!r}", field="name")
    row = InstanceRow(
        id=new_id(),
        owner_id=user.id,
        name=name,
        gpu_model=model.id,
        gpu_count=count,
        **workload.columns(work),
        ssh_key=ssh_key,
        plan=req.plan,
        plan_at_expiry=req.at_expiry if monthly else None,
        quote_id=req.quote_id,
        quoted_price_micros=quoted.micros if quoted is not None else None,
        movable=req.movable,
        status=S.PENDING.value,
        status_reason="waiting for the scheduler",
        desired="running",
        price_micros=price.micros,
        currency=price.currency,
        attempt=0,
        usage_closed=0,
        billed_micros=0,
        billed_closed_micros=0,
        created_at=now,
        updated_at=now,
        requested_at=now,
        sla_seconds=catalog.sla_ready_within_seconds,
        weights=weights,
        bare_metal=req.bare_metal,
        placement_dc=dc,
    )
    store.add_instance(session, row)
    attached = volumes.attach(session, user, row, mounts, now) if mounts else []
    store.insert_event(
        session,
        {
            "instance_id": row.id,
            "at": now,
            "from_status": None,
            "to_status": S.PENDING.value,
            "reason": CREATED,
        },
    )
    if monthly:
        held = _hold(
            session, row, pricing.plan_total(price, count), "the 30-day plan", now, new=True
        )
    else:
        held = _hold(
            session, row, price.times(count), "one hour of this instance", now, price, new=True
        )
    return Launched(row, held, [(v.name, v.mount_path or "") for v in attached])


def get(session: Session, user: UserRow, id_or_name: str, lock: bool = False) -> InstanceRow:
    """The caller's instance; another tenant's instance is indistinguishable from a missing one."""
    row = store.get_owned(session, user.id, id_or_name, lock=lock)
    if row is None:
        raise NotFound(f"no instance {id_or_name!r}")
    return row


def list_for(
    session: Session, user: UserRow, include_terminated: bool = False
) -> list[InstanceRow]:
    return store.list_owned(session, user.id, include_terminated)


def allocations_of(session: Session, row: InstanceRow) -> list[AllocationRow]:
    """The GPUs the instance holds now, by node and GPU index."""
    return node_store.allocations_of(session, row.id)


def stop(session: Session, user: UserRow, id_or_name: str, now: datetime) -> InstanceRow:
    row = get(session, user, id_or_name, lock=True)
    status = S(row.status)
    if status in (S.STOPPED, S.STOPPING) and row.desired == "stopped":
        return row
    if status in (S.FAILED, S.TERMINATED) or row.desired == "terminated":
        raise InvalidTransition(f"instance {row.name} is {status}: it cannot be stopped")
    end_plan_if_over(session, row, now)
    if metering.on_plan(row, now) and row.plan_until is not None:
        raise InvalidTransition(
            f"instance {row.name} is on a monthly plan until "
            f"{as_utc(row.plan_until):%Y-%m-%d %H:%M} UTC and keeps its GPUs until then; "
            "terminate it to give them up (no refund)"
        )
    row.desired = "stopped"
    if status == S.PENDING:
        switch_status(session, row, S.STOPPED, now, "stopped by user before placement")
    elif status in (S.PROVISIONING, S.RUNNING):
        switch_status(session, row, S.STOPPING, now, "stop requested by user")
    return row


def start(
    session: Session,
    user: UserRow,
    id_or_name: str,
    now: datetime,
    no_gpu_price: Money | None = None,
    move_to: str | None = None,
) -> InstanceRow:
    """Back to the scheduler; one hour is held. An instance whose stop kept its disk starts
    on the disk's host, or without GPUs there at `no_gpu_price` per hour, or on host
    `move_to`, its disk copied there (`services.storage.starts` chooses)."""
    row = get(session, user, id_or_name, lock=True)
    status = S(row.status)
    if status in COMMITTED:
        return row
    if status != S.STOPPED or row.desired == "terminated":
        raise InvalidTransition(f"instance {row.name} is {status}: only a stopped one can start")
    end_plan_if_over(session, row, now)
    # before the hold (what it may draw on); a no-GPU run's price must not outlive it
    was_no_gpu, row.no_gpu = row.no_gpu, no_gpu_price is not None
    if row.plan == Plan.MONTHLY.value and row.plan_until is None and row.quoted_price_micros:
        # stopped before its plan began: the 30 days are held again, at the launch's price
        plan_price = Money(row.quoted_price_micros, row.currency)
        _hold(session, row, pricing.plan_total(plan_price, row.gpu_count), "the 30-day plan", now)
    elif no_gpu_price is not None:  # fixed now: the GPU price book does not apply to it
        row.price_micros = no_gpu_price.micros
        _hold(session, row, no_gpu_price, "one hour without GPUs", now)
    else:
        price = pricing.dearest(pricing.history(session), row.gpu_model, now)
        row.price_micros = price.micros if was_no_gpu else row.price_micros
        _hold(session, row, price.times(row.gpu_count), "one hour of this instance", now, price)
    row.desired, row.move_from = "running", None
    reason = "start requested by user (GPUs are re-allocated)"
    if row.disk_host is not None:  # a stop kept its disk there: it starts there
        row.placement_host, row.placement_dc = row.disk_host, row.placement_dc or row.data_centre
        reason = f"start requested by user (on {row.disk_host}, where its disk is kept)"
        if no_gpu_price is not None:
            reason = f"start without GPUs requested by user (on {row.disk_host}, its disk)"
        elif move_to is not None:
            row.placement_host, row.move_from = move_to, row.disk_host
            reason = f"start requested by user, moving its disk from {row.disk_host} to {move_to}"
    switch_status(session, row, S.PENDING, now, reason)
    return row


def terminate(session: Session, user: UserRow, id_or_name: str, now: datetime) -> InstanceRow:
    """Idempotent: terminating a terminated instance is fine."""
    row = get(session, user, id_or_name, lock=True)
    status = S(row.status)
    row.desired = "terminated"
    if status in (S.PENDING, S.STOPPED, S.FAILED):
        switch_status(session, row, S.TERMINATED, now, "terminated by user")
    elif status in (S.PROVISIONING, S.RUNNING):
        switch_status(session, row, S.STOPPING, now, "terminate requested by user")
    session.flush()
    return row
