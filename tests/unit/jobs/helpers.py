"""Small builders shared by the job engine tests."""

from __future__ import annotations

import time
from collections.abc import Callable

from isthmus.jobs import HandlerRegistry, Job, JobStore, Leases, RetryPolicy, Runner

NO_JITTER = RetryPolicy(max_attempts=3, base_delay=10.0, max_delay=60.0, jitter=0.0)


def make_runner(
    store: JobStore,
    registry: HandlerRegistry,
    *,
    owner: str = "worker-a",
    lease_seconds: float = 30.0,
    policy: RetryPolicy = NO_JITTER,
) -> Runner:
    return Runner(Leases(store.engine, store.clock, owner, lease_seconds), registry, policy)


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0, interval: float = 0.02) -> None:
    """Poll until ``predicate`` holds; fail the test if it never does (no timing asserted)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def found(store: JobStore, job_type: str, resource_id: str) -> Job:
    """The job the test expects the store to hold."""
    job = store.find(job_type, resource_id)
    assert job is not None, f"no {job_type} job for {resource_id}"
    return job
