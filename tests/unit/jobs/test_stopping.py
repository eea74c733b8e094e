"""Run deadlines and lost leases: a handler stops at its next region call, and
stopping is never counted as a failure."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from isthmus import callguard
from isthmus.clients import NeutronClient
from isthmus.jobs import (
    HandlerRegistry,
    JobStatus,
    JobStore,
    LeaseWatch,
    ManualClock,
    Stopped,
    Worker,
    WorkerSettings,
)
from isthmus.jobs.registry import JobContext

from ..clients.fakes import FakeAdapter, Response, as_adapter
from .helpers import NO_JITTER, make_runner, wait_for


def _region() -> tuple[NeutronClient, FakeAdapter]:
    http = FakeAdapter(lambda call: Response(200, {"network": {"id": "net-1"}}))
    return NeutronClient(as_adapter(http), "RegionOne"), http


# -- the context -------------------------------------------------------------------


def test_the_deadline_makes_should_stop_true(store: JobStore, clock: ManualClock) -> None:
    seen: list[tuple[float | None, bool, str | None]] = []
    registry = HandlerRegistry()

    def handler(ctx: JobContext) -> None:
        seen.append((ctx.remaining(), ctx.should_stop(), ctx.stop_reason()))
        clock.advance(5)
        seen.append((ctx.remaining(), ctx.deadline_exceeded(), ctx.stop_reason()))

    registry.register("sync", handler, deadline=5)
    runner = make_runner(store, registry)
    store.enqueue("sync", "net-1")
    runner.run_due()
    assert seen == [(5.0, False, None), (0.0, True, "run deadline passed")]


def test_types_without_a_deadline_get_the_runner_default(store: JobStore, clock: ManualClock) -> None:
    deadlines: list[timedelta] = []
    registry = HandlerRegistry()

    def record(ctx):
        assert ctx.deadline is not None
        deadlines.append(ctx.deadline - clock.now())
    registry.register("sync", record)
    runner = make_runner(store, registry)
    store.enqueue("sync", "net-1")
    runner.run_due()
    assert deadlines == [timedelta(seconds=300)]


def test_a_deadline_must_be_positive() -> None:
    with pytest.raises(ValueError):
        HandlerRegistry().register("sync", lambda ctx: None, deadline=0)
    with pytest.raises(ValueError):
        WorkerSettings(run_deadline=-1)


def test_an_expired_or_lost_lease_makes_should_stop_true(clock: ManualClock) -> None:
    lease = LeaseWatch(expires_at=clock.now() + timedelta(seconds=30))
    ctx = JobContext("j", "sync", "net-1", None, {}, 1, _clock=clock, _lease=lease)
    assert not ctx.should_stop()
    clock.advance(30)
    assert ctx.stop_reason() == "lease expired (not renewed in time)"
    lease.expires_at = clock.now() + timedelta(seconds=30)  # a renewal
    assert not ctx.should_stop()
    lease.lost = True
    assert ctx.lease_lost() and ctx.stop_reason() == "lease lost to another worker"
    with pytest.raises(Stopped, match="lease lost"):
        ctx.check()


def test_a_context_built_outside_the_runner_never_stops_by_itself() -> None:
    ctx = JobContext("inline", "sync", "net-1", None, {}, 1)
    assert ctx.remaining() is None and not ctx.should_stop()
    ctx.check()


# -- the call guard ------------------------------------------------------------------


def test_the_call_guard_is_scoped_and_reaches_copied_contexts() -> None:
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    def stop() -> None:
        raise Stopped("test")

    callguard.check()  # none installed: nothing happens
    with callguard.installed(stop):
        with pytest.raises(Stopped):
            callguard.check()
        with ThreadPoolExecutor(1) as pool:
            copied = pool.submit(contextvars.copy_context().run, callguard.check)
            plain = pool.submit(callguard.check)
        with pytest.raises(Stopped):
            copied.result()
        plain.result()  # a thread that did not copy the context has no guard
    callguard.check()


# -- the runner ----------------------------------------------------------------------


def test_past_the_deadline_the_next_region_call_raises_and_is_no_failure(
    store: JobStore, clock: ManualClock
) -> None:
    neutron, http = _region()
    registry = HandlerRegistry()

    def handler(ctx: JobContext) -> None:
        neutron.get("networks", "net-1")
        clock.advance(61)
        neutron.get("networks", "net-1")  # never sent
        raise AssertionError("not reached")

    registry.register("sync", handler, deadline=60)
    runner = make_runner(store, registry, policy=NO_JITTER, lease_seconds=1000)
    job = store.enqueue("sync", "net-1")
    runner.run_due()
    assert len(http.calls) == 1
    after = store.get(job.id)
    assert after.status is JobStatus.NEW and after.failures == 0
    assert after.run_after == clock.now() + timedelta(seconds=10)  # the type's backoff
    assert "run deadline passed" in (after.last_error or "")


def test_a_handler_raising_stopped_is_no_failure(store: JobStore, clock: ManualClock) -> None:
    registry = HandlerRegistry()

    def handler(ctx: JobContext) -> None:
        clock.advance(400)
        ctx.check()

    registry.register("sync", handler)
    runner = make_runner(store, registry, policy=NO_JITTER, lease_seconds=1000)
    job = store.enqueue("sync", "net-1")
    for _ in range(5):  # more than max_attempts (3): still never FAIL
        runner.run_due()
        clock.advance(60)
    after = store.get(job.id)
    assert after.status is JobStatus.NEW and after.failures == 0 and after.attempt == 5


def test_a_stop_at_shutdown_makes_the_job_due_at_once(store: JobStore, clock: ManualClock) -> None:
    stop = threading.Event()
    registry = HandlerRegistry()

    def handler(ctx: JobContext) -> None:
        stop.set()  # what the worker does on SIGTERM
        ctx.check()

    registry.register("sync", handler)
    runner = make_runner(store, registry)
    job = store.enqueue("sync", "net-1")
    [claim] = runner.claim(1)
    runner.run(claim, stop)
    after = store.get(job.id)
    assert after.status is JobStatus.NEW and after.run_after == clock.now() and after.failures == 0


def test_an_expired_lease_taken_over_stops_the_old_run_and_drops_its_outcome(
    store: JobStore, clock: ManualClock
) -> None:
    neutron, http = _region()
    registry = HandlerRegistry()
    b = make_runner(store, registry, owner="worker-b", lease_seconds=30)
    taken: list = []

    def handler(ctx: JobContext) -> None:
        neutron.get("networks", "net-1")
        clock.advance(31)  # no renewal arrived (dispatcher stuck, DB down)
        taken.extend(b.claim(1))
        neutron.get("networks", "net-1")  # never sent beside the new owner

    registry.register("sync", handler)
    a = make_runner(store, registry, owner="worker-a", lease_seconds=30)
    job = store.enqueue("sync", "net-1")
    [claim] = a.claim(1)
    assert a.run(claim) is None
    assert len(http.calls) == 1
    [claim_b] = taken
    now = store.get(job.id)
    assert now.lease_owner == "worker-b" and now.version == claim_b.job.version  # a wrote nothing


# -- the worker ----------------------------------------------------------------------


def test_a_lease_lost_at_renewal_stops_the_handler_at_its_next_call(
    store: JobStore, clock: ManualClock
) -> None:
    neutron, http = _region()
    registry = HandlerRegistry()
    go_on = threading.Event()
    outcome: list[BaseException] = []

    def handler(ctx: JobContext) -> None:
        neutron.get("networks", "net-1")
        go_on.wait(10)
        try:
            neutron.get("networks", "net-1")
        except Stopped as exc:
            outcome.append(exc)
            raise

    registry.register("sync", handler)
    worker = Worker(store, registry, WorkerSettings(lease_seconds=30, owner="worker-a"), NO_JITTER)
    job = store.enqueue("sync", "net-1")
    [claim] = worker.runner.claim(1)
    worker._start(claim)
    wait_for(lambda: len(http.calls) == 1)

    clock.advance(20)
    worker._renew_all()  # renewed: 30 s from now
    [entry] = worker._running.values()
    assert entry.lease.expires_at == clock.now() + timedelta(seconds=30) and not entry.lease.lost

    clock.advance(31)
    [claim_b] = make_runner(store, registry, owner="worker-b").claim(1)
    worker._renew_all()
    assert entry.lease.lost and entry.stop.is_set()

    go_on.set()
    wait_for(lambda: not worker.running_jobs)
    assert len(http.calls) == 1 and "lease lost" in str(outcome[0])
    now = store.get(job.id)
    assert now.lease_owner == "worker-b" and now.version == claim_b.job.version
    assert now.failures == 1  # the takeover's, as ever; the stopped run added none


def test_a_stopping_worker_lets_region_calls_go_on_within_its_grace(
    store: JobStore, clock: ManualClock
) -> None:
    neutron, http = _region()
    stop = threading.Event()
    registry = HandlerRegistry()

    def handler(ctx: JobContext) -> None:
        stop.set()
        neutron.get("networks", "net-1")  # still sent: the run may finish
        assert ctx.should_stop()

    registry.register("sync", handler)
    runner = make_runner(store, registry)
    job = store.enqueue("sync", "net-1")
    [claim] = runner.claim(1)
    runner.run(claim, stop)
    assert len(http.calls) == 1 and store.get(job.id).status is JobStatus.SUCCESS


def test_a_job_released_at_shutdown_sends_nothing_more(store: JobStore, clock: ManualClock) -> None:
    neutron, http = _region()
    registry = HandlerRegistry()
    go_on = threading.Event()

    def handler(ctx: JobContext) -> None:
        go_on.wait(10)  # ignores should_stop()
        neutron.get("networks", "net-1")

    registry.register("sync", handler)
    worker = Worker(store, registry, WorkerSettings(lease_seconds=30, shutdown_grace=0.05), NO_JITTER)
    job = store.enqueue("sync", "net-1")
    [claim] = worker.runner.claim(1)
    worker._start(claim)
    worker._shutdown()
    assert store.get(job.id).status is JobStatus.NEW  # released
    go_on.set()
    wait_for(lambda: not worker.running_jobs)
    assert http.calls == [] and store.get(job.id).status is JobStatus.NEW


def test_a_handler_ignoring_its_deadline_is_abandoned_as_a_failure(store: JobStore, clock: ManualClock) -> None:
    neutron, http = _region()
    registry = HandlerRegistry()
    go_on = threading.Event()

    def handler(ctx: JobContext) -> None:
        go_on.wait(10)  # stuck, not checking anything
        neutron.get("networks", "net-1")

    registry.register("sync", handler, deadline=5)
    worker = Worker(store, registry, WorkerSettings(lease_seconds=30, owner="worker-a"), NO_JITTER)
    job = store.enqueue("sync", "net-1")
    [claim] = worker.runner.claim(1)
    worker._start(claim)
    [entry] = worker._running.values()

    clock.advance(34)
    worker._renew_all()  # past the deadline, within the grace of one lease: kept
    assert worker.running_jobs == [job.id]
    clock.advance(1)
    worker._renew_all()
    assert worker.running_jobs == []  # the slot is free again
    failed = store.get(job.id)
    assert failed.status is JobStatus.NEW and failed.failures == 1 and failed.lease_owner is None
    assert "did not stop" in (failed.last_error or "")

    go_on.set()  # the stuck thread wakes: it sends nothing and records nothing
    assert entry.thread is not None
    entry.thread.join(10)
    assert not entry.thread.is_alive()
    assert http.calls == [] and store.get(job.id).version == failed.version
