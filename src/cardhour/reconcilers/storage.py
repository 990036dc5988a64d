"""Volumes: removes deleted volumes' data through the backend (outside any transaction), and
charges the GB-hours volumes are kept (`services.storage`)."""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session, sessionmaker

from cardhour.backends.base import Backend, BackendError
from cardhour.core.clock import Clock
from cardhour.db.engine import transaction
from cardhour.reconcilers.base import Reconciler
from cardhour.services.storage import charges, volumes

log = logging.getLogger("cardhour.reconcilers.storage")


class StorageReconciler(Reconciler):
    name = "storage"

    def __init__(
        self,
        sessions: sessionmaker[Session],
        clock: Clock,
        backend: Backend,
        charge_every_seconds: int,
    ) -> None:
        super().__init__(sessions, clock)
        self.backend = backend
        self.charge_every_seconds = charge_every_seconds

    def step(self) -> bool:
        with transaction(self.sessions) as session:
            charges.charge_due(session, self.clock.now(), self.charge_every_seconds)
            going = volumes.being_deleted(session)
        changed = False
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
