"""The database side of the provisioning reconciler: claim rows under a lease, apply outcomes.

Pattern (DESIGN.md rule 4): `claim` in one short transaction writes a lease token; the reconciler
calls the backend with no transaction open; `apply_*` in another transaction changes the row only
if the token still matches (otherwise another worker or a user action got there first).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core.catalog import Catalog
from cardhour.core.clock import as_utc
from cardhour.core.states import InstanceStatus
from cardhour.core.storage.volumes import Attachment
from cardhour.db.models import InstanceRow
from cardhour.services.compute import workload
from cardhour.services.compute.lifecycle import switch_status
from cardhour.services.storage import disks, volumes
from cardhour.store.compute import instances as store
from cardhour.store.compute import nodes as node_store
from cardhour.store.storage import volumes as disk_store

S = InstanceStatus
WORK_STATES = (S.PROVISIONING.value, S.STOPPING.value)


@dataclass(frozen=True)
class Claim:
    instance_id: str
    token: str
    status: str
    desired: str
    external_name: str | None
    gpu_model: str
    gpu_count: int
    image: str
    ssh_key: str | None
    gpus_by_node: dict[str, list[int]]
    status_since: datetime  # when the row entered `status`
    attempt: int = 0  # the placement being worked on (readiness stages are per placement)
    bare_metal: bool = False
    weights: str | None = None  # model weights to mount (catalog `model_weights` id)
    data_centre: str | None = None
    name: str = ""  # the renter's name for it (a cluster's hostnames derive from it)
    # the renter's workload (`workload`; `image` above): the command (`sh -c`; None: the
    # container idles), environment variables in the order given, container ports to publish
    command: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    ports: tuple[int, ...] = ()
    #: a cluster's nodes in rank order (a replacement takes the rank of the node it replaced)
    node_order: tuple[str, ...] = ()
    volumes: tuple[Attachment, ...] = ()  # the volumes it mounts (`services.storage`)
    no_gpu: bool = False  # started without GPUs on the host its disk is kept on
    move_from: str | None = None  # a start moving its kept disk: the host it is copied from
    move_gb: int = 0  # the size of the disk it moves (its copy's time is allowed for)


def claim(session: Session, now: datetime, lease_seconds: int, limit: int = 20) -> list[Claim]:
    claims = []
    for row in store.claimable(session, WORK_STATES, now, limit):
        token = secrets.token_hex(8)
        row.lease_token = token
        row.lease_expires_at = now + timedelta(seconds=lease_seconds)
        gpus: dict[str, list[int]] = {}
        work = workload.of(row)
        for alloc in node_store.allocations_of(session, row.id):
            gpus.setdefault(alloc.node_id, []).append(alloc.gpu_index)
        if row.no_gpu and row.node_order:  # a node, none of its GPUs
            gpus = {node: [] for node in json.loads(row.node_order)}
        claims.append(
            Claim(
                row.id,
                token,
                row.status,
                row.desired,
                row.external_name,
                row.gpu_model,
                row.gpu_count,
                row.image,
                row.ssh_key,
                gpus,
                as_utc(row.updated_at),  # only a status change moves updated_at
                row.attempt,
                row.bare_metal,
                row.weights,
                row.data_centre,
                row.name,
                work.command,
                tuple(work.env.items()),
                tuple(work.ports),
                tuple(json.loads(row.node_order)) if row.node_order else (),
                tuple(volumes.attachments(session, row)) if row.placement_dc else (),
                row.no_gpu,
                row.move_from,
                sum(d.size_gb for d in disk_store.kept_disks_of(session, row.id))
                if row.move_from
                else 0,
            )
        )
    session.flush()
    return claims


def fenced(session: Session, claim: Claim) -> InstanceRow | None:
    """The claimed row, locked, while the claim's lease still holds it; else None."""
    row = store.get_instance(session, claim.instance_id, lock=True)
    if row is None or row.lease_token != claim.token or row.status != claim.status:
        return None
    return row


def apply_running(session: Session, claim: Claim, connection: dict, now: datetime) -> bool:
    row = fenced(session, claim)
    if row is None:
        return False
    row.connection = json.dumps(connection, sort_keys=True)
    switch_status(session, row, S.RUNNING, now, "ready")
    return True


def apply_failed(session: Session, claim: Claim, message: str, now: datetime) -> bool:
    """`failed`; a start from a kept disk (on its host, without GPUs, or moving it) stops
    instead: the disk is where it was, never lost with a failed instance."""
    row = fenced(session, claim)
    if row is None:
        return False
    if row.disk_host is not None:
        row.desired = "stopped"
        what = "the move" if row.move_from is not None else "the start"
        said = f"{what} failed ({message}); its disk stays on {row.disk_host}"
        switch_status(session, row, S.STOPPING, now, said)
        return True
    switch_status(session, row, S.FAILED, now, message)
    return True


def apply_released(
    session: Session,
    claim: Claim,
    now: datetime,
    disk: tuple[str, int] | None = None,
    catalog: Catalog | None = None,
) -> bool:
    """The backend has nothing left: `stopping` ends in `stopped` or `terminated` as desired.
    `disk`: (host, GiB) where the backend kept the container's disk (a start is placed there;
    billed as storage while stopped, with `catalog`'s price)."""
    row = fenced(session, claim)
    if row is None:
        return False
    row.connection = None
    if disk is not None and row.desired == "stopped":
        row.disk_host = disk[0]
        if catalog is not None:
            disks.kept(session, catalog, row, disk[1], now)
    final = S.TERMINATED if row.desired == "terminated" else S.STOPPED
    switch_status(session, row, final, now, "released")
    return True


def release_lease(session: Session, claim: Claim, now: datetime, why: str | None = None) -> bool:
    """Still in progress: let a later pass pick it up again, after rows waiting longer. `why`:
    what holds it up, as the backend said (its status reason until it moves on)."""
    row = fenced(session, claim)
    if row is None:
        return False
    if why:
        row.status_reason = f"{S(row.status)}: {why}"
    row.lease_token = None
    row.lease_expires_at = now  # claims go to never-claimed rows first, then oldest release
    session.flush()
    return True


def still_wanted(session: Session, claim: Claim) -> bool:
    """Whether the workload `claim` launched still belongs to a live instance. A worker whose
    lease was overtaken (a user stopped it, another worker finished it) must remove what it
    created when this is false, or the machine leaks while its GPUs are handed out again."""
    row = store.get_instance(session, claim.instance_id, lock=True)
    return (
        row is not None
        and row.external_name == claim.external_name
        and row.status in (S.PROVISIONING.value, S.RUNNING.value)
    )


def kept_disks_to_settle(session: Session) -> list[tuple[str, str, str]]:
    """(instance id, its latest workload, status) of instances whose kept disk the backend
    settles: a running one runs from it (what kept it can go), a terminated one is gone."""
    found = store.with_disk_to_settle(session)
    return [(i, e, st) for i, e, st in found if e is not None]


def disk_settled(session: Session, instance_id: str, status: str) -> None:
    """The backend settled the instance's kept disk while it was `status`."""
    row = store.get_instance(session, instance_id, lock=True)
    if row is not None and row.status == status:
        row.disk_host = None
        session.flush()
