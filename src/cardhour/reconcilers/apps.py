"""The marketplace's slow work: calls the gateway recorded are posted to the ledger
(`services.marketplace.earnings.settle`, in batches); developers' shares older than 7 days
become available (`earnings.mature`); the autoscaler stops replicas idle past their app's
`idle_seconds` (on the injected clock) down to its `min_replicas`, prepares every serving
version (its image is built before its first call) and starts replicas up to `min_replicas`
(more start as calls arrive); the fleet shares of this process's replicas are
marked seen, and those no process has seen for a minute are released
(`services.marketplace.replicas`). The runtime is any `core.replicas.AppRuntime`."""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from cardhour.core.clock import Clock
from cardhour.core.replicas import AppRuntime
from cardhour.db.engine import transaction
from cardhour.reconcilers.base import Reconciler
from cardhour.services.marketplace import apps
from cardhour.services.marketplace import earnings as app_earnings
from cardhour.services.marketplace import replicas as app_replicas

log = logging.getLogger("cardhour.apps")
WARM_RETRY_SECONDS = 60  # a version whose replicas would not start is not retried every loop


class AppsReconciler(Reconciler):
    name = "apps"

    def __init__(
        self,
        sessions: sessionmaker[Session],
        clock: Clock,
        runtime: AppRuntime,
        code_dir: Path,
    ) -> None:
        super().__init__(sessions, clock)
        self.runtime, self.code_dir = runtime, code_dir
        self._retry_at: dict[str, float] = {}  # app version → when to try warming it again

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
            serving = apps.serving(session, self.code_dir)
        self.runtime.scale_down({spec.key for spec in serving}, lost)
        now = self.clock.now().timestamp()
        for spec in serving:  # prepared, `min_replicas` warm: the first call does not wait
            if self._retry_at.get(spec.key, 0) <= now:
                try:
                    self.runtime.prepare(spec)
                    if spec.scaling.min_replicas:
                        self.runtime.warm(spec)
                except Exception:  # noqa: BLE001 - no room, cannot start: calls will say why
                    log.warning("preparing or warming %s failed", spec.key, exc_info=True)
                    self._retry_at[spec.key] = now + WARM_RETRY_SECONDS
        return expired
