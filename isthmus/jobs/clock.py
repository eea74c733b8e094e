"""Injectable time source: the engine never calls ``datetime.now`` directly.

Tests drive retries, backoff and lease expiry with :class:`ManualClock` instead
of sleeping. Timestamps are timezone-aware UTC in Python and naive UTC in the
database (see ``schema.to_db``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

from sqlalchemy.engine import Engine

LOG = logging.getLogger(__name__)


class Clock(Protocol):
    def now(self) -> datetime:
        """Current time, timezone-aware UTC."""


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class DatabaseClock:
    """The database server's clock, read once per ``refresh`` seconds and carried
    forward on this host's monotonic clock in between. Leases, due times and
    takeovers are then judged by one clock for every worker: a worker whose own
    clock runs ahead cannot take a live job, one running behind cannot keep a
    dead one. Until the database first answers, this host's clock stands in
    (and says so)."""

    def __init__(self, engine: Engine, refresh: float = 60.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.engine = engine
        self.refresh = refresh
        self.monotonic = monotonic
        self._base: tuple[datetime, float] | None = None  # (server time, monotonic then)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            base = self._base
            if base is None or self.monotonic() - base[1] >= self.refresh:
                base = self._measure() or base
                self._base = base
            if base is None:
                return datetime.now(UTC)
            return base[0] + timedelta(seconds=self.monotonic() - base[1])

    def _measure(self) -> tuple[datetime, float] | None:
        from isthmus.db import database_now

        before = self.monotonic()
        try:
            server = database_now(self.engine)
        except Exception as err:  # noqa: BLE001 - carry on with the last reading (or this host's clock)
            LOG.warning("database clock unreadable, carrying on with the last reading: %s", err)
            return None
        return server, (before + self.monotonic()) / 2


class ManualClock:
    """A clock that moves only when told to; thread-safe."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2030, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now
