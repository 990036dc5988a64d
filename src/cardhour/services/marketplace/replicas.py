"""App replicas as containers on the fleet: before a replica starts, the scheduler places it
like any container (a fraction of one GPU, whole GPUs, or CPU and memory only, of the manifest's
`resources`) and its share is recorded (`app_replicas`), so instances and other replicas see
that capacity as taken (`fleet.load`); when it stops, the share is released.

Each gateway process's runtime has an id (`ReplicaPlacer.runtime_id`); its apps reconciler
refreshes the `seen_at` of the replicas it runs (`heartbeat`), and any apps reconciler releases
shares not seen for `SEEN_TTL` (`expire`): a process that died does not hold capacity for
longer than that. A replica whose share expired anyway (its process stalled) is stopped, never
left running on capacity the scheduler may give away. `SEEN_TTL` is above the longest cold
start and reconciler interval the settings allow.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from cardhour.core.apps import REPLICA_CPU_MILLI, Resources
from cardhour.core.catalog import Catalog
from cardhour.core.clock import Clock
from cardhour.core.errors import CardhourError
from cardhour.core.replicas import Placed
from cardhour.db.engine import transaction
from cardhour.db.models import AppReplicaRow
from cardhour.scheduler import MILLI, Pending, Request, Scheduler
from cardhour.services.compute import fleet
from cardhour.services.ids import new_id
from cardhour.store.compute import nodes as node_store
from cardhour.store.marketplace import replicas as store

SEEN_TTL = timedelta(seconds=60)
ATTEMPTS = 3  # placements raced by another one on the same node, then given up


class NoRoom(CardhourError):
    """No node has room for one more replica (the scheduler's reason says why)."""

    code = "no_capacity"
    http_status = 503


def request_of(replica_id: str, resources: Resources) -> Request:
    """The container request of one replica."""
    models = frozenset({resources.gpu}) if resources.gpu else frozenset()
    memory = resources.memory_gb * 1024
    milli = resources.milli_gpu
    if milli == 0:
        return Request(replica_id, REPLICA_CPU_MILLI, memory, gpu_models=models)
    if milli < MILLI:
        return Request(replica_id, REPLICA_CPU_MILLI, memory, 1, milli, models)
    return Request(replica_id, REPLICA_CPU_MILLI, memory, milli // MILLI, MILLI, models)


def place(
    session: Session,
    catalog: Catalog,
    engine: Scheduler,
    key: str,
    resources: Resources,
    runtime_id: str,
    now: datetime,
) -> Placed | None:
    """Place one replica of app version `key` and record its share; None when a placement on
    the same node committed meanwhile (place again). NoRoom when nothing fits."""
    view = fleet.load(session, catalog)
    replica_id = new_id()
    # a fresh engine: the platform's is shared between threads and holds per-call state
    decision = Scheduler(engine.profile, engine.workload).bind(
        view.state, request_of(replica_id, resources)
    )
    if isinstance(decision, Pending):
        raise NoRoom(f"no room for a replica of this app: {decision.reason}")
    (binding,) = decision.bindings
    node = view.state.names[binding.node]
    if not node_store.bump_version(session, node, view.versions[node]):
        return None
    gpus = tuple(int(g) for g in binding.gpus)
    store.add_replica(
        session,
        AppReplicaRow(
            id=replica_id,
            app_key=key,
            node_id=node,
            gpus=",".join(str(g) for g in gpus),
            milli=binding.milli if gpus else 0,
            cpu_milli=binding.cpu_milli,
            memory_mib=binding.memory_mib,
            runtime_id=runtime_id,
            created_at=now,
            seen_at=now,
        ),
    )
    return Placed(replica_id, node, gpus, binding.milli if gpus else 0)


def release(session: Session, replica_id: str) -> None:
    """Give a replica's share back (one already released: nothing happens)."""
    store.delete_replica(session, replica_id)


def heartbeat(session: Session, runtime_id: str, live: Collection[str], now: datetime) -> set[str]:
    """The runtime's replicas still run: `live` (their ids) are seen now. Returns those of
    them whose share is gone (expired: the runtime must stop them, the capacity is not theirs
    any more)."""
    if not live:
        return set()
    store.mark_seen(session, runtime_id, live, now)
    return set(live) - store.replica_ids_of(session, runtime_id)


def expire(session: Session, now: datetime) -> int:
    """Release the shares of replicas no runtime has seen for `SEEN_TTL`; how many."""
    return store.delete_unseen(session, now - SEEN_TTL)


class ReplicaPlacer:
    """The runtime's `core.replicas.Placer` for this platform: each placement and release in a
    transaction of its own (the runtime calls them from a call's thread, outside any other);
    a placement raced `ATTEMPTS` times on its node is NoRoom."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        catalog: Catalog,
        engine: Callable[[], Scheduler],
        clock: Clock,
    ) -> None:
        self.sessions, self.catalog, self.engine, self.clock = sessions, catalog, engine, clock
        self.runtime_id = new_id()

    def place(self, key: str, resources: Resources) -> Placed:
        for _ in range(ATTEMPTS):
            with transaction(self.sessions) as session:
                placed = place(
                    session, self.catalog, self.engine(), key, resources, self.runtime_id,
                    self.clock.now(),
                )  # fmt: skip
            if placed is not None:
                return placed
        raise NoRoom("the fleet kept changing under the placement; try again")

    def release(self, replica_id: str) -> None:
        with transaction(self.sessions) as session:
            release(session, replica_id)
