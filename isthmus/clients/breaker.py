"""A circuit breaker per remote service: after a call could not reach it
(refused, timed out), calls fail fast for ``cooldown`` seconds instead of each
spending a timeout on it. A sick region then costs its jobs nothing and holds
no worker slot. After the cooldown one call is let through as the trial (the
others keep failing fast while it is in flight): its success closes the
breaker, its failure opens it for another cooldown. A trial that never reports
back frees the slot after a cooldown, so the breaker can never stick.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_COOLDOWN = 10.0


@dataclass
class Breaker:
    cooldown: float = DEFAULT_COOLDOWN
    clock: Callable[[], float] = time.monotonic
    _open_until: float = field(default=float("-inf"), init=False)
    _trial_since: float | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def open_for(self) -> float:
        """Seconds left before calls are tried again (0: closed or half-open)."""
        with self._lock:
            return max(0.0, self._open_until - self.clock())

    def admit(self) -> float:
        """0 if this call may go (it may be the trial); else seconds to wait."""
        with self._lock:
            now = self.clock()
            if self._open_until == float("-inf"):
                return 0.0  # closed
            if now < self._open_until:
                return self._open_until - now
            if self._trial_since is not None and now - self._trial_since < self.cooldown:
                return self._trial_since + self.cooldown - now  # a trial is in flight
            self._trial_since = now
            return 0.0

    def failed(self) -> None:
        with self._lock:
            self._open_until = self.clock() + self.cooldown
            self._trial_since = None

    def succeeded(self) -> None:
        with self._lock:
            self._open_until = float("-inf")
            self._trial_since = None
