"""The one injectable source of `now`. Tests use `ManualClock`; everything else `SystemClock`."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Current time, timezone-aware UTC."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to. Thread-safe."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float = 0, **kwargs: float) -> datetime:
        with self._lock:
            self._now += timedelta(seconds=seconds, **kwargs)
            return self._now


def as_utc(value: datetime) -> datetime:
    """Databases may hand back naive datetimes (SQLite); they are always UTC here."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)
