"""Storage: removes deleted volumes' data and terminated instances' kept disks through the
backend (outside any transaction), charges the GB-hours volumes are kept, and keeps, warns
about and in the end deletes the volumes of owners without money (`services.storage`, on the
charge cadence)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from cardhour.backends.base import Backend, BackendError
from cardhour.core.clock import Clock
from cardhour.db.engine import transaction
from cardhour.reconcilers.base import Reconciler
from cardhour.services.compute import provisioning
from cardhour.services.storage import charges, retention, volumes

log = logging.getLogger("cardhour.reconcilers.storage")


class StorageReconciler(Reconciler):
    name = "storage"

    def __init__(
        self,
        sessions: sessionmaker[Session],
        clock: Clock,
        backend: Backend,
        charge_every_seconds: int,
        currency: str,
        retention: timedelta,
    ) -> None:
        super().__init__(sessions, clock)
        self.backend = backend
        self.charge_every_seconds = charge_every_seconds
        self.currency = currency
        self.retention = retention
        self._checked_at: datetime | None = None  # the last retention pass

    def step(self) -> bool:
        now = self.clock.now()
        with transaction(self.sessions) as session:
            charges.charge_due(session, now, self.charge_every_seconds)
        changed = False
        every = timedelta(seconds=self.charge_every_seconds)
        if self._checked_at is None or now - self._checked_at >= every:
            with transaction(self.sessions) as session:
                changed |= retention.check(session, now, self.currency, self.retention) > 0
            self._checked_at = now
        with transaction(self.sessions) as session:
            going = volumes.being_deleted(session)
            disks = provisioning.kept_disks_to_settle(session)  # an index: few rows
        for instance_id, workload, status in disks:
            try:  # running from it: its stopped workload goes; terminated: the disk goes
                if status == "running":
                    self.backend.started(workload)
                else:
                    self.backend.let_go_disk(workload)
            except BackendError as exc:
                log.warning("cannot settle the disk of %s yet: %s", workload, exc)
                continue
            with transaction(self.sessions) as session:
                provisioning.disk_settled(session, instance_id, status)
        for volume in going:
            try:
                done = volume.host is None or self.backend.remove_volume(
                    volume.id, volume.host, volume.store
                )
            except BackendError as exc:
                log.warning("cannot remove volume %s yet: %s", volume.id, exc)
                continue
            if done:
                with transaction(self.sessions) as session:
                    changed |= volumes.deleted(session, volume.id, self.clock.now())
        return changed
