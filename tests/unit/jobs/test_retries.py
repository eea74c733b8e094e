"""Retries, backoff, RetryLater, permanent failures and lease takeover, on a manual clock."""

from __future__ import annotations

from datetime import timedelta

from isthmus.jobs import (
    HandlerRegistry,
    JobStatus,
    JobStore,
    ManualClock,
    PermanentFailure,
    RetryLater,
    RetryPolicy,
)

from .helpers import NO_JITTER, found, make_runner


def _always(exc: Exception) -> HandlerRegistry:
    registry = HandlerRegistry()

    def handler(ctx) -> None:
        raise exc

    registry.register("sync", handler)
    return registry


def test_failures_back_off_exponentially_then_fail(store: JobStore, clock: ManualClock) -> None:
    runner = make_runner(store, _always(RuntimeError("neutron 500")), policy=NO_JITTER)
    job = store.enqueue("sync", "net-1")
    start = clock.now()

    assert runner.run_due() == 1
    first = store.get(job.id)
    assert first.status is JobStatus.NEW and first.failures == 1 and first.attempt == 1
    assert first.run_after == start + timedelta(seconds=10)
    assert first.last_error == "RuntimeError: neutron 500"

    clock.advance(9.9)
    assert runner.run_due() == 0  # not due before its backoff
    clock.advance(0.1)
    assert runner.run_due() == 1
    second = store.get(job.id)
    assert second.failures == 2 and second.run_after == clock.now() + timedelta(seconds=20)

    clock.advance(20)
    assert runner.run_due() == 1
    final = store.get(job.id)
    assert final.status is JobStatus.FAIL and final.failures == 3 and final.attempt == 3
    assert final.last_error == "RuntimeError: neutron 500" and final.finished_at == clock.now()
    clock.advance(3600)
    assert runner.run_due() == 0  # FAIL is terminal until redo or a new enqueue


def test_per_type_policy_overrides_the_default(store: JobStore, clock: ManualClock) -> None:
    registry = HandlerRegistry()
    registry.register("sync", lambda ctx: 1 / 0, retry=RetryPolicy(max_attempts=1, jitter=0))
    runner = make_runner(store, registry, policy=NO_JITTER)
    job = store.enqueue("sync", "net-1")
    runner.run_due()
    assert store.get(job.id).status is JobStatus.FAIL
    assert store.get(job.id).last_error == "ZeroDivisionError: division by zero"


def test_retry_later_is_not_a_failure(store: JobStore, clock: ManualClock) -> None:
    runner = make_runner(store, _always(RetryLater("RegionTwo unreachable", delay=5)), policy=NO_JITTER)
    job = store.enqueue("sync", "net-1")
    for _ in range(10):  # far more than max_attempts=3
        assert runner.run_due() == 1
        waiting = store.get(job.id)
        assert waiting.status is JobStatus.NEW and waiting.failures == 0
        assert waiting.run_after == clock.now() + timedelta(seconds=5)
        assert waiting.last_error == "retry later: RegionTwo unreachable"
        clock.advance(5)
    assert store.get(job.id).attempt == 10


def test_retry_later_without_delay_uses_backoff(store: JobStore, clock: ManualClock) -> None:
    runner = make_runner(store, _always(RetryLater("busy")), policy=NO_JITTER)
    job = store.enqueue("sync", "net-1")
    runner.run_due()
    assert store.get(job.id).run_after == clock.now() + timedelta(seconds=10)
    clock.advance(10)
    runner.run_due()
    assert store.get(job.id).run_after == clock.now() + timedelta(seconds=20)


def test_permanent_failure_fails_at_once(store: JobStore) -> None:
    runner = make_runner(store, _always(PermanentFailure("payload names no pod")))
    job = store.enqueue("sync", "net-1")
    runner.run_due()
    failed = store.get(job.id)
    assert failed.status is JobStatus.FAIL and failed.failures == 1
    assert failed.last_error == "PermanentFailure: payload names no pod"


def test_handler_gets_its_context(store: JobStore, clock: ManualClock) -> None:
    seen = []
    registry = HandlerRegistry()

    @registry.handler("sync")
    def handler(ctx) -> None:
        seen.append((ctx.job_type, ctx.resource_id, ctx.project_id, dict(ctx.payload), ctx.attempt))
        if ctx.attempt == 1:
            raise RuntimeError("first try fails")

    runner = make_runner(store, registry)
    job = store.enqueue("sync", "port-9", project_id="p7", payload={"pod_id": "pod-2"})
    runner.run_due()
    clock.advance(10)
    runner.run_due()
    assert seen == [
        ("sync", "port-9", "p7", {"pod_id": "pod-2"}, 1),
        ("sync", "port-9", "p7", {"pod_id": "pod-2"}, 2),
    ]
    assert store.get(job.id).status is JobStatus.SUCCESS


def test_only_registered_types_are_claimed(store: JobStore) -> None:
    runner = make_runner(store, _always(RuntimeError()))
    store.enqueue("router_setup", "r-1")
    assert runner.run_due() == 0
    assert found(store, "router_setup", "r-1").status is JobStatus.NEW


def test_expired_lease_is_taken_over_and_the_old_outcome_dropped(store: JobStore, clock: ManualClock) -> None:
    registry = HandlerRegistry()
    registry.register("sync", lambda ctx: None)
    a = make_runner(store, registry, owner="worker-a", lease_seconds=30)
    b = make_runner(store, registry, owner="worker-b", lease_seconds=30)
    job = store.enqueue("sync", "net-1")
    [claim_a] = a.claim(5)
    assert claim_a.job.lease_owner == "worker-a" and claim_a.job.attempt == 1
    assert b.claim(5) == []  # one runner per key while the lease holds

    clock.advance(29)
    assert a.leases.renew(claim_a)  # a live worker keeps its lease
    clock.advance(29)
    assert b.claim(5) == []
    clock.advance(2)  # 31 s since the renewal: worker-a is presumed dead
    [claim_b] = b.claim(5)
    assert claim_b.job.id == job.id and claim_b.job.lease_owner == "worker-b"
    assert claim_b.job.attempt == 2 and claim_b.job.failures == 1
    assert "worker-a" in (claim_b.job.last_error or "")

    assert a.run(claim_a) is None  # late result of the old holder: dropped
    assert not a.leases.renew(claim_a)
    assert not a.leases.release(claim_a)
    assert store.get(job.id).lease_owner == "worker-b"
    done = b.run(claim_b)
    assert done is not None and done.status is JobStatus.SUCCESS and done.attempt == 2


def test_a_job_that_keeps_killing_workers_ends_failed(store: JobStore, clock: ManualClock) -> None:
    registry = HandlerRegistry()
    registry.register("sync", lambda ctx: None)
    runner = make_runner(store, registry, lease_seconds=10, policy=NO_JITTER)  # max_attempts=3
    job = store.enqueue("sync", "net-1")
    for _ in range(3):
        runner.claim(1)  # claimed, then the worker "dies"
        clock.advance(11)
    assert runner.claim(1) == []
    poisoned = store.get(job.id)
    assert poisoned.status is JobStatus.FAIL and poisoned.failures == 3
    assert "expired" in (poisoned.last_error or "") and poisoned.lease_owner is None


def test_release_makes_the_job_due_again(store: JobStore) -> None:
    registry = HandlerRegistry()
    registry.register("sync", lambda ctx: None)
    runner = make_runner(store, registry)
    job = store.enqueue("sync", "net-1")
    [claim] = runner.claim(1)
    assert runner.leases.release(claim)
    released = store.get(job.id)
    assert released.status is JobStatus.NEW and released.lease_owner is None and released.failures == 0
    assert runner.run_due() == 1
    assert store.get(job.id).status is JobStatus.SUCCESS
