"""Places pending instances: one cycle, one transaction, one leader."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from cardhour.core.catalog import Catalog
from cardhour.core.clock import Clock
from cardhour.db.engine import transaction
from cardhour.reconcilers.base import Reconciler
from cardhour.scheduler import Scheduler
from cardhour.services.compute import scheduling


class SchedulingReconciler(Reconciler):
    name = "scheduling"

    def __init__(
        self,
        sessions: sessionmaker[Session],
        clock: Clock,
        catalog: Catalog,
        scheduler: Scheduler,
        workload_window: int,
    ) -> None:
        super().__init__(sessions, clock)
        self.catalog = catalog
        self.policy = scheduler
        self.workload_window = workload_window

    def step(self) -> bool:
        with transaction(self.sessions) as session:
            result = scheduling.run_cycle(
                session, self.catalog, self.policy, self.clock.now(), self.workload_window
            )
        return bool(result.placed)
