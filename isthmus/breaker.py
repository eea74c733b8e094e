"""A circuit breaker per remote service: after a call could not reach it
(refused, timed out), calls fail fast for ``cooldown`` seconds instead of each
spending a timeout on it. A sick region then costs its jobs nothing and holds
no worker slot.

After the cooldown the breaker is half-open: exactly one caller is let through
as the trial, the others keep failing fast until its verdict (success closes
the breaker, failure opens it for another cooldown). Only the trial's own
caller (its thread) gives that verdict: a call admitted earlier that fails or
is cancelled late must not end the trial and let a second one through. Without
this, every caller
waiting on a still-sick region would go through at once and each hang on it
again. A trial that never reports (its caller was cancelled) is given up after
``trial_timeout``, so a lost verdict cannot keep the breaker open for ever.

A busy service is not a sick one: a call that failed while the service answered
other calls (``failed(since=...)`` with the call's start) does not count. A hung or
dead service answers nothing, so its first failure opens the breaker; an
overloaded one keeps answering some calls, so its late answers only fail (or
shorten) those calls. ``threshold`` consecutive counted failures open it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_COOLDOWN = 10.0
DEFAULT_TRIAL_TIMEOUT = 150.0  # longer than any call's own timeout


@dataclass
class Breaker:
    cooldown: float = DEFAULT_COOLDOWN
    clock: Callable[[], float] = time.monotonic
    trial_timeout: float = DEFAULT_TRIAL_TIMEOUT
    threshold: int = 1
    _failures: int = field(default=0, init=False)
    _last_success: float = field(default=float("-inf"), init=False)
    _open_until: float = field(default=float("-inf"), init=False)
    _trial_since: float | None = field(default=None, init=False)
    _trial_owner: int | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def admit(self) -> float:
        """0 when this call may go (closed, or it is the half-open trial); else
        the seconds to wait before asking again (the call should fail fast)."""
        with self._lock:
            now = self.clock()
            if self._open_until == float("-inf"):
                return 0.0
            if now < self._open_until:
                return self._open_until - now
            if self._trial_since is not None and now - self._trial_since < self.trial_timeout:
                return max(self.cooldown / 10, 0.001)  # a trial is under way: its verdict decides
            self._trial_since = now
            self._trial_owner = threading.get_ident()
            return 0.0

    def _is_trial(self) -> bool:
        """Whether the calling thread is the trial (lock held)."""
        return self._trial_since is not None and self._trial_owner == threading.get_ident()

    def _end_trial(self) -> None:
        self._trial_since = None
        self._trial_owner = None

    def open_for(self) -> float:
        """Seconds left before calls are tried again (0: closed, or a trial may go)."""
        with self._lock:
            now = self.clock()
            if now < self._open_until:
                return self._open_until - now
            if self._trial_since is not None and now - self._trial_since < self.trial_timeout:
                return max(self.cooldown / 10, 0.001)
            return 0.0

    def state(self) -> str:
        """``closed``, ``open`` (calls fail fast) or ``half_open`` (a trial may go or is going)."""
        with self._lock:
            if self._open_until == float("-inf"):
                return "closed"
            return "open" if self.clock() < self._open_until else "half_open"

    @property
    def trial_in_flight(self) -> bool:
        with self._lock:
            return self._trial_since is not None

    def now(self) -> float:
        """The breaker's clock: what a caller passes back as ``since``."""
        return self.clock()

    def failed(self, since: float | None = None) -> None:
        """A call failed; ``since``: when it started (answers meanwhile mean busy, not sick)."""
        with self._lock:
            trial = self._is_trial()
            if not trial:
                if self._trial_since is not None:
                    return  # a straggler admitted before the trial: the trial's verdict is newer
                if since is not None and self._last_success >= since:
                    return
            self._failures += 1
            # A failed trial re-opens at once; a closed breaker waits for the threshold.
            if trial or self._open_until != float("-inf") or self._failures >= self.threshold:
                self._open_until = self.clock() + self.cooldown
            if trial:
                self._end_trial()

    def succeeded(self) -> None:
        """Any answer closes it: the service is up (whoever's call it was)."""
        with self._lock:
            self._last_success = self.clock()
            self._failures = 0
            self._open_until = float("-inf")
            self._end_trial()

    def abandoned(self) -> None:
        """The call ended without a verdict (cancelled): if it was the trial, the
        next caller is; anyone else's cancellation changes nothing."""
        with self._lock:
            if self._is_trial():
                self._end_trial()
