"""Keeps the node table in step with the backend's inventory.

A tick whose inventory equals the last one that matched the nodes, while the fleet inventory's
version has not moved since (no node added, changed, drained or resumed), changes nothing and
reads only the version: a 10,000-node fleet is not compared row by row every tick.
"""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from cardhour.backends.base import Backend
from cardhour.core.clock import Clock
from cardhour.core.topology import NodeSpec
from cardhour.db.engine import transaction
from cardhour.reconcilers.base import Reconciler
from cardhour.services.compute import fleet


class InventoryReconciler(Reconciler):
    name = "inventory"

    def __init__(self, sessions: sessionmaker[Session], clock: Clock, backend: Backend) -> None:
        super().__init__(sessions, clock)
        self.backend = backend
        self._matched: tuple[str, list[NodeSpec]] | None = None  # (version, inventory)

    def step(self) -> bool:
        inventory = self.backend.sync_inventory()  # outside the transaction
        with transaction(self.sessions) as session:
            version = fleet.inventory_version(session)
            if version is not None and self._matched == (version, inventory):
                return False
            changed = fleet.sync_nodes(session, inventory) != (0, 0)
        self._matched = None if changed or version is None else (version, inventory)
        return False  # nothing else waits on an inventory change
