"""Charges running instances on a cadence, expires credits, ends monthly plans, and warns then
stops owners whose money ran out (`services.autostop`)."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from cardhour.core.clock import Clock
from cardhour.db.engine import transaction
from cardhour.reconcilers.base import Reconciler
from cardhour.services.billing import credit_accounts
from cardhour.services.compute.autostop import meter_and_autostop


class MeteringReconciler(Reconciler):
    name = "metering"

    def __init__(
        self,
        sessions: sessionmaker[Session],
        clock: Clock,
        charge_every_seconds: int,
        warn_seconds: int = 60,
        grace_seconds: int = 30,
    ) -> None:
        super().__init__(sessions, clock)
        self.charge_every_seconds = charge_every_seconds
        self.warn_seconds = warn_seconds
        self.grace_seconds = grace_seconds

    def step(self) -> bool:
        with transaction(self.sessions) as session:  # its own: it locks accounts only
            credit_accounts.expire_credits(session, self.clock.now())
        with transaction(self.sessions) as session:
            result = meter_and_autostop(
                session,
                self.clock.now(),
                self.warn_seconds,
                self.grace_seconds,
                self.charge_every_seconds,
            )
        return bool(result.stopped or result.plans_ended)
