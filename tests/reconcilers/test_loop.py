"""The generic reconciler loop (`reconcilers.base.Reconciler.run`): a step that raises is logged
and retried on the next tick, a busy step runs again at once, `wake()` cuts the wait short."""

from __future__ import annotations

import threading
import time

from sqlalchemy.orm import Session, sessionmaker

from cardhour.core.clock import ManualClock
from cardhour.reconcilers.base import Reconciler


class Scripted(Reconciler):
    """Plays `script` (True: busy, False: idle, an exception: raise) then idles."""

    name = "scripted"

    def __init__(self, script: list[object]) -> None:
        super().__init__(sessionmaker[Session](), ManualClock())
        self.script = list(script)
        self.steps = 0
        self.done = threading.Event()

    def step(self) -> bool:
        self.steps += 1
        if not self.script:
            self.done.set()
            return False
        outcome = self.script.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return bool(outcome)


def _run(r: Reconciler, interval: float) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=r.run, args=(stop, interval), daemon=True)
    thread.start()
    return stop, thread


def test_a_failing_step_is_retried_and_busy_steps_run_back_to_back() -> None:
    r = Scripted([RuntimeError("boom"), True, True, RuntimeError("again"), True])
    stop, thread = _run(r, interval=0.01)
    assert r.done.wait(10), "the loop died or stalled"
    stop.set()
    thread.join(10)
    assert not thread.is_alive()
    assert r.steps >= 6 and r.script == []


def test_wake_cuts_an_idle_wait_short() -> None:
    r = Scripted([])
    stop, thread = _run(r, interval=3600)  # idle: without wake() the next step is an hour away
    assert r.done.wait(10)
    r.done.clear()
    started = time.monotonic()
    r.wake()
    assert r.done.wait(10), "wake() did not run a step"
    assert time.monotonic() - started < 60
    stop.set()
    r.wake()
    thread.join(10)
    assert not thread.is_alive()
