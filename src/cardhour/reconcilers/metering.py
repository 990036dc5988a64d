"""Charges running instances on a cadence and stops those whose owner's balance ran out."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from cardhour.core.clock import Clock
from cardhour.db.engine import transaction
from cardhour.reconcilers.base import Reconciler
from cardhour.services.autostop import meter_and_autostop


class MeteringReconciler(Reconciler):
    name = "metering"

    def __init__(
        self,
        sessions: sessionmaker[Session],
        clock: Clock,
        margin_seconds: int,
        charge_every_seconds: int,
    ) -> None:
        super().__init__(sessions, clock)
        self.margin_seconds = margin_seconds
        self.charge_every_seconds = charge_every_seconds

    def step(self) -> bool:
        with transaction(self.sessions) as session:
            result = meter_and_autostop(
                session, self.clock.now(), self.margin_seconds, self.charge_every_seconds
            )
        return bool(result.stopped)
