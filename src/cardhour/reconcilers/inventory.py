"""Keeps the node table in step with the backend's inventory."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from cardhour.backends.base import Backend
from cardhour.core.clock import Clock
from cardhour.db.engine import transaction
from cardhour.reconcilers.base import Reconciler
from cardhour.services.compute import fleet


class InventoryReconciler(Reconciler):
    name = "inventory"

    def __init__(self, sessions: sessionmaker[Session], clock: Clock, backend: Backend) -> None:
        super().__init__(sessions, clock)
        self.backend = backend

    def step(self) -> bool:
        inventory = self.backend.sync_inventory()  # outside the transaction
        with transaction(self.sessions) as session:
            fleet.sync_nodes(session, inventory)
        return False  # nothing else waits on an inventory change
