"""The marketplace's slow work: calls the gateway recorded are posted to the ledger
(`services.app_earnings.settle`, in batches), developers' shares older than 7 days become
available (`services.app_earnings.mature`), and the autoscaler stops replicas idle past their app's
`idle_seconds`, down to its `min_replicas` (scaling up happens as calls arrive); the fleet
shares of this process's replicas are marked seen, and those no process has seen for a minute
are released (`services.app_replicas`)."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from cardhour.backends.apps.runtime import LocalAppRuntime
from cardhour.core.clock import Clock
from cardhour.db.engine import transaction
from cardhour.reconcilers.base import Reconciler
from cardhour.services import app_earnings, app_replicas


class AppsReconciler(Reconciler):
    name = "apps"

    def __init__(
        self, sessions: sessionmaker[Session], clock: Clock, runtime: LocalAppRuntime
    ) -> None:
        super().__init__(sessions, clock)
        self.runtime = runtime

    def step(self) -> bool:
        now = self.clock.now
        settled = matured = 0
        try:
            with transaction(self.sessions) as session:
                settled = app_earnings.settle(session, now())
        finally:
            try:  # whatever happened to the calls' posting
                with transaction(self.sessions) as session:
                    matured = app_earnings.mature(session, now())
            finally:
                expired = self._replicas()
        return settled + matured + expired > 0

    def _replicas(self) -> int:
        """Mark this process's replicas seen, release shares nobody has seen, stop replicas that
        are idle, retired (their version no longer serves) or lost their share."""
        placer = self.runtime.placer
        with transaction(self.sessions) as session:
            lost: set[str] = set()
            if placer is not None:
                live = [p.replica_id for p in self.runtime.placed()]
                lost = app_replicas.heartbeat(session, placer.runtime_id, live, self.clock.now())
            expired = app_replicas.expire(session, self.clock.now())
            serving = app_replicas.serving(session)
        self.runtime.scale_down(serving, lost)
        return expired
