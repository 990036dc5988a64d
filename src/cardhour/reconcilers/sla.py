"""Warns owners whose request to run an instance passed its SLA window (`services.sla`)."""

from __future__ import annotations

from cardhour.db.engine import transaction
from cardhour.reconcilers.base import Reconciler
from cardhour.services.compute import sla


class SlaReconciler(Reconciler):
    name = "sla"

    def step(self) -> bool:
        with transaction(self.sessions) as session:
            sla.warn_overdue(session, self.clock.now())
        return False  # an event only: nothing else waits on it
