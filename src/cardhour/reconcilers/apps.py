"""The marketplace's slow work: calls the gateway recorded are posted to the ledger
(`services.app_earnings.settle`, in batches), developers' shares older than 7 days become
available (`services.app_earnings.mature`), and the autoscaler stops replicas idle past their app's
`idle_seconds`, down to its `min_replicas` (scaling up happens as calls arrive)."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from cardhour.backends.apps.runtime import LocalAppRuntime
from cardhour.core.clock import Clock
from cardhour.db.engine import transaction
from cardhour.reconcilers.base import Reconciler
from cardhour.services import app_earnings


class AppsReconciler(Reconciler):
    name = "apps"

    def __init__(
        self, sessions: sessionmaker[Session], clock: Clock, runtime: LocalAppRuntime
    ) -> None:
        super().__init__(sessions, clock)
        self.runtime = runtime

    def step(self) -> bool:
        try:
            with transaction(self.sessions) as session:
                settled = app_earnings.settle(session, self.clock.now())
            with transaction(self.sessions) as session:
                matured = app_earnings.mature(session, self.clock.now())
        finally:
            self.runtime.scale_down()  # whatever happened to the money
        return settled + matured > 0
