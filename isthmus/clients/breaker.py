"""A circuit breaker per remote service: after a call could not reach it
(refused, timed out), calls fail fast for ``cooldown`` seconds instead of each
spending a timeout on it. A sick region then costs its jobs nothing and holds
no worker slot; the first call after the cooldown is the trial.
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
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def open_for(self) -> float:
        """Seconds left before calls are tried again (0: closed)."""
        with self._lock:
            return max(0.0, self._open_until - self.clock())

    def failed(self) -> None:
        with self._lock:
            self._open_until = self.clock() + self.cooldown

    def succeeded(self) -> None:
        with self._lock:
            self._open_until = float("-inf")
