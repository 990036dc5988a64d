"""One generic reconciler: `step()` does one pass; `run()` loops it on a thread until stopped.

Each step owns its transactions. A step that raises is logged and retried on the next tick;
it never kills the loop.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod

from sqlalchemy.orm import Session, sessionmaker

from cardhour.core.clock import Clock

log = logging.getLogger("cardhour.reconcilers")


class Reconciler(ABC):
    name = "reconciler"

    def __init__(self, sessions: sessionmaker[Session], clock: Clock) -> None:
        self.sessions = sessions
        self.clock = clock
        self._wake = threading.Event()
        #: woken after a step that did something (placing wakes provisioning, say)
        self.followers: list[Reconciler] = []

    @abstractmethod
    def step(self) -> bool:
        """One pass. Returns True when it did something (the loop then runs again at once)."""

    def wake(self) -> None:
        self._wake.set()

    def run(self, stop: threading.Event, interval: float) -> None:
        while not stop.is_set():
            self._wake.clear()  # a wake() during the step below makes the wait return at once
            busy = False
            try:
                busy = self.step()
            except Exception:  # noqa: BLE001 - a loop must survive any one failure
                log.exception("%s step failed; retrying", self.name)
            if busy:
                for follower in self.followers:
                    follower.wake()
            else:
                self._wake.wait(interval)
