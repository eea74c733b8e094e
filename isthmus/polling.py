"""One way to wait: call something until it holds (or stops raising), within a bound.

Everything in Isthmus that waits for another process to catch up (a service to
answer, an image copy to become active, a shadow to appear) polls through
:func:`poll` or :func:`retry`, so every wait is bounded and says, when it gives
up, what it waited for and what it saw last.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(check: Callable[[], T], timeout: float, what: str | Callable[[], str], interval: float = 1.0,
         retry_on: tuple[type[BaseException], ...] = (), clock: Callable[[], float] = time.monotonic,
         sleep: Callable[[float], None] = time.sleep) -> T:
    """``check()`` until it returns a truthy value, which is returned; raising one
    of ``retry_on`` counts as "not yet", anything else ends the wait. After
    ``timeout`` seconds, TimeoutError naming ``what`` (or what it returns then)
    and the last result or error."""
    deadline = clock() + timeout
    while True:
        error: BaseException | None = None
        try:
            last = check()
            if last:
                return last
        except retry_on as err:
            last, error = None, err
        if clock() >= deadline:
            described = what() if callable(what) else what
            seen = f"{type(error).__name__}: {error}" if error is not None else repr(last)
            raise TimeoutError(f"{described}: not within {timeout:g}s (last: {seen})") from error
        sleep(interval)


def retry(call: Callable[[], T], timeout: float, what: str, interval: float = 1.0,
          retry_on: tuple[type[BaseException], ...] = (Exception,)) -> T:
    """``call()`` until it stops raising one of ``retry_on``; its value, whatever it is."""
    return poll(lambda: (call(),), timeout, what, interval, retry_on)[0]
