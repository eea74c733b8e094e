"""Bounded thread pools for the gateway's blocking work.

Token validation has its own pool, apart from the slow work (image copies,
inline syncs, service-credential checks): a burst of image copies can then
never starve authentication, and so every other request. asyncio's default
executor is shared by everything, which is what this replaces.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class BoundedPool:
    def __init__(self, workers: int, name: str) -> None:
        self.workers = workers
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in this pool; waits for a free thread."""
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, functools.partial(fn, *args, **kwargs))

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


class Busy(Exception):
    """An admission pool's workers and queue are all taken."""


class AdmissionPool(BoundedPool):
    """A pool that refuses at once, instead of queueing without bound, when its
    ``workers`` are busy and ``queue`` more wait already (image copies: eight large
    copies must not hold every tenant's creates behind them)."""

    def __init__(self, workers: int, queue: int, name: str) -> None:
        super().__init__(workers, name)
        self.capacity = workers + queue
        self.in_flight = 0  # touched on the event loop only

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self.in_flight >= self.capacity:
            raise Busy(f"{self.in_flight} in flight")
        self.in_flight += 1
        future = asyncio.get_running_loop().run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))
        future.add_done_callback(self._finished)
        # A caller that stops waiting (its deadline) leaves the work running, and
        # counted until it really ends: the pool stays bounded.
        return await asyncio.shield(future)

    def _finished(self, _future: asyncio.Future) -> None:
        self.in_flight -= 1
