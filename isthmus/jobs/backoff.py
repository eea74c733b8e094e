"""Retry policy: exponential backoff with a cap and optional jitter."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """How often a failing job is retried and how long it waits in between.

    ``max_attempts`` counts failed runs in one cycle: the run that makes
    ``failures == max_attempts`` moves the job to FAIL. ``RetryLater`` does not
    count. Jitter spreads retries of many jobs failing together (e.g. one
    region down) so they do not all hit the region at the same instant.
    """

    max_attempts: int = 8
    base_delay: float = 2.0
    max_delay: float = 300.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("delays must be >= 0")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter must be within [0, 1]")

    def delay(self, n: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retry number ``n`` (1-based): base * 2**(n-1), capped."""
        # Cap the exponent first so a large n cannot overflow a float.
        raw: float = self.base_delay * (2 ** min(max(n, 1) - 1, 62))
        capped = min(raw, self.max_delay)
        if self.jitter:
            capped *= 1 + self.jitter * (2 * rand() - 1)
        return max(capped, 0.0)

    def exhausted(self, failures: int) -> bool:
        return failures >= self.max_attempts
