"""Watches running instances for nodes their backend has lost, and has those nodes replaced
(`services.readiness.repair_running`): on a multi-node instance the rest stays and the gate
runs again; otherwise the instance is placed again and the old workload removed.

Backend calls happen with no transaction open; each repair is one transaction that checks the
instance still runs as the workload that was polled.
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session, sessionmaker

from cardhour.backends.base import Backend, BackendError, Probing
from cardhour.core.catalog import Catalog
from cardhour.core.clock import Clock
from cardhour.db.engine import transaction
from cardhour.reconcilers.base import Reconciler
from cardhour.services.compute import readiness
from cardhour.store.compute import instances as store

log = logging.getLogger("cardhour.reconcilers.health")


class HealthReconciler(Reconciler):
    name = "health"

    def __init__(
        self, sessions: sessionmaker[Session], clock: Clock, backend: Backend, catalog: Catalog
    ) -> None:
        """Does nothing on a backend that cannot report lost nodes (not `Probing`)."""
        super().__init__(sessions, clock)
        self.backend = backend
        self.probe = backend if isinstance(backend, Probing) else None
        self.catalog = catalog

    def step(self) -> bool:
        if self.probe is None:
            return False
        with transaction(self.sessions) as session:
            running = store.running_workloads(session)
        changed = False
        for instance_id, name in running:
            try:
                lost = self.probe.lost_nodes(name)
            except BackendError as exc:  # asked again on the next pass
                log.warning("cannot read the nodes of %s: %s", name, exc)
                continue
            if not lost:
                continue
            with transaction(self.sessions) as session:
                outcome = readiness.repair_running(
                    session, self.catalog, instance_id, name, lost, self.clock.now()
                )
            if outcome == readiness.PLACED_AGAIN:
                self.backend.terminate(name)
            changed |= outcome is not None
        return changed
