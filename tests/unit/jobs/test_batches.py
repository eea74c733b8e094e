"""Batch handlers: a burst of one type's jobs is one handler run, with one outcome per job.

Inline (manual clock) for the window rule and per-job outcomes; worker threads
for slots, wake-ups and one run per job across workers.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY

from isthmus.clients import NeutronClient
from isthmus.jobs import (
    Batch,
    BatchPolicy,
    HandlerRegistry,
    JobContext,
    JobStatus,
    JobStore,
    Leases,
    ManualClock,
    PermanentFailure,
    RetryLater,
    Stopped,
    Worker,
    WorkerSettings,
    make_engine,
)
from isthmus.jobs.outcomes import Outcome

from ..clients.fakes import FakeAdapter, Response, as_adapter
from .helpers import NO_JITTER, found, make_runner, wait_for

WINDOW = 0.05


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def kind() -> str:
    """A job type of this test only: the metrics registry is process-wide."""
    return f"b{uuid.uuid4().hex[:8]}"


class Runs:
    """What a batch handler saw: the resource ids of each run, in order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches: list[list[str]] = []

    def record(self, batch: Batch) -> None:
        with self.lock:
            self.batches.append([ctx.resource_id for ctx in batch.items])

    @property
    def sizes(self) -> list[int]:
        return [len(b) for b in self.batches]


def _batch_registry(handler: Any, **options: Any) -> HandlerRegistry:
    registry = HandlerRegistry()
    registry.register_batch("bulk", handler, **{"window": WINDOW, **options})
    return registry


def _enqueue(store: JobStore, count: int, job_type: str = "bulk") -> list[str]:
    ids = [f"port-{n:03d}" for n in range(count)]
    for resource_id in ids:
        store.enqueue(job_type, resource_id)
    return ids


def _region() -> tuple[NeutronClient, FakeAdapter]:
    http = FakeAdapter(lambda call: Response(200, {"network": {"id": "net-1"}}))
    return NeutronClient(as_adapter(http), "RegionOne"), http


# -- registration ------------------------------------------------------------------------


def test_batch_registration_and_its_policy() -> None:
    registry = HandlerRegistry()
    registry.register("plain", lambda ctx: None)

    @registry.batch_handler("bulk", max_size=7, window=0.2, deadline=30)
    def bulk(batch: Batch) -> None:
        pass

    registry.register_batch("defaults", lambda batch: None)
    assert registry.get("bulk").batch == BatchPolicy(7, 0.2) and registry.get("bulk").handler is bulk
    assert registry.get("bulk").deadline == 30
    assert registry.get("defaults").batch == BatchPolicy(max_size=100, window=0.05)
    assert registry.get("plain").batch is None
    assert registry.batch_types() == ("bulk", "defaults")
    assert set(registry.plain_policies(NO_JITTER)) == {"plain"}
    for bad in (dict(max_size=0), dict(window=-0.1), dict(max_size=1.5), dict(window=float("nan"))):
        with pytest.raises(ValueError):
            registry.register_batch("other", lambda batch: None, **bad)
    with pytest.raises(ValueError, match="already registered"):
        registry.register_batch("plain", lambda batch: None)
    assert "other" not in registry


def test_a_batch_is_indexed_by_resource_and_takes_marks_only_for_its_jobs() -> None:
    a = JobContext("j1", "bulk", "port-1", None, {}, 1)
    b = JobContext("j2", "bulk", "port-2", None, {}, 1)
    batch = Batch("bulk", (a, b))
    assert batch.by_resource == {"port-1": a, "port-2": b} and list(batch) == [a, b] and len(batch) == 2
    assert batch.outcome(a) is None  # unmarked: success, unless the handler raises
    batch.retry_later(a, "later")
    batch.fail(b, ValueError("bad"), permanent=True)
    assert batch.outcome(a) == Outcome("retry_later", "later")
    assert batch.outcome(b) == Outcome("permanent_failure", "ValueError: bad")
    with pytest.raises(ValueError, match="not in this batch"):
        batch.fail(JobContext("j3", "bulk", "port-3", None, {}, 1), "x")
    with pytest.raises(ValueError):
        Batch("bulk", ())
    with pytest.raises(ValueError, match="holds jobs of sync"):
        Batch("bulk", (a, JobContext("j4", "sync", "net-1", None, {}, 1)))


# -- the window ------------------------------------------------------------------------------


def test_a_burst_within_the_window_is_one_run(store: JobStore, clock: ManualClock) -> None:
    runs = Runs()
    runner = make_runner(store, _batch_registry(runs.record))
    ids = [f"port-{n}" for n in range(5)]
    for resource_id in ids:  # one event every 10 ms, polled in between
        store.enqueue("bulk", resource_id)
        assert runner.run_due() == 0
        clock.advance(0.01)
    assert runner.run_due() == 5  # 50 ms after the first event
    assert runs.sizes == [5] and sorted(runs.batches[0]) == ids
    assert all(found(store, "bulk", r).status is JobStatus.SUCCESS for r in ids)


def test_jobs_inside_the_window_wait_and_are_claimed_once_it_passed(store: JobStore, clock: ManualClock) -> None:
    runs = Runs()
    runner = make_runner(store, _batch_registry(runs.record))
    first = store.enqueue("bulk", "port-1")
    clock.advance(0.03)
    second = store.enqueue("bulk", "port-2")
    assert runner.run_due() == 0  # the oldest has waited 30 ms of 50
    assert store.get(first.id).version == first.version  # not even a write
    clock.advance(0.019)
    assert runner.run_due() == 0
    clock.advance(0.001)  # the oldest is due 50 ms: the younger one comes along
    assert runner.run_due() == 2
    assert runs.batches == [["port-1", "port-2"]]
    assert store.get(second.id).status is JobStatus.SUCCESS


def test_the_window_counts_from_when_a_job_is_due(store: JobStore, clock: ManualClock) -> None:
    """A job backing off is not due: its window starts at its run_after."""
    runs = Runs()
    registry = _batch_registry(runs.record)
    runner = make_runner(store, registry)
    leases = runner.leases
    store.enqueue("bulk", "port-1")
    assert leases.batch_ripe_at("bulk", WINDOW) == clock.now() + timedelta(seconds=WINDOW)
    assert leases.claim_batch("bulk", NO_JITTER, 10, WINDOW) == []
    clock.advance(WINDOW)
    [claim] = leases.claim_batch("bulk", NO_JITTER, 10, WINDOW)
    assert leases.retry_later(claim, 10.0, "region down").status is JobStatus.NEW
    assert leases.batch_ripe_at("bulk", WINDOW) is None  # not claimable before its run_after
    clock.advance(10.0)
    assert runner.run_due() == 0
    clock.advance(WINDOW)
    assert runner.run_due() == 1 and runs.sizes == [1]


def test_max_size_caps_a_batch_and_the_rest_is_the_next(store: JobStore, clock: ManualClock) -> None:
    runs = Runs()
    runner = make_runner(store, _batch_registry(runs.record, max_size=10))
    ids = _enqueue(store, 25)
    clock.advance(WINDOW)
    assert runner.run_due() == 25
    assert runs.sizes == [10, 10, 5]
    assert sorted(r for b in runs.batches for r in b) == ids  # each job in exactly one run


def test_run_due_counts_batched_jobs_against_its_limit(store: JobStore, clock: ManualClock) -> None:
    runs = Runs()
    runner = make_runner(store, _batch_registry(runs.record, max_size=10))
    _enqueue(store, 25)
    clock.advance(WINDOW)
    assert runner.run_due(limit=12) == 12 and runs.sizes == [10, 2]
    assert runner.run_due() == 13


def test_plain_claims_leave_batch_types_alone(store: JobStore, clock: ManualClock) -> None:
    runs = Runs()
    registry = _batch_registry(runs.record, window=0)
    registry.register("sync", lambda ctx: None)
    runner = make_runner(store, registry)
    store.enqueue("bulk", "port-1")
    store.enqueue("sync", "net-1")
    assert [c.job.job_type for c in runner.claim(10)] == ["sync"]
    [claim] = runner.claim_batch("bulk")
    assert runner.run(claim) is not None  # a batch type's claim run alone is a batch of one
    assert runs.batches == [["port-1"]]


# -- outcomes, per job -------------------------------------------------------------------------


def test_each_job_gets_the_outcome_marked_for_it(store: JobStore, clock: ManualClock) -> None:
    def handler(batch: Batch) -> None:
        batch.retry_later(batch.by_resource["port-001"], "RegionTwo unreachable", delay=7)
        batch.fail(batch.by_resource["port-002"], RuntimeError("neutron 500"))
        batch.fail(batch.by_resource["port-003"], "payload names no pod", permanent=True)

    runner = make_runner(store, _batch_registry(handler), policy=NO_JITTER)
    _enqueue(store, 5)
    clock.advance(WINDOW)
    assert runner.run_due() == 5
    now = clock.now()
    later, broken, doomed = (found(store, "bulk", f"port-00{n}") for n in (1, 2, 3))
    assert (later.status, later.attempt, later.failures) == (JobStatus.NEW, 1, 0)
    assert later.run_after == now + timedelta(seconds=7) and later.last_error == "retry later: RegionTwo unreachable"
    assert (broken.status, broken.attempt, broken.failures) == (JobStatus.NEW, 1, 1)
    assert broken.run_after == now + timedelta(seconds=10) and broken.last_error == "RuntimeError: neutron 500"
    assert (doomed.status, doomed.failures, doomed.last_error) == (JobStatus.FAIL, 1, "payload names no pod")
    for resource_id in ("port-000", "port-004"):  # unmarked: success
        done = found(store, "bulk", resource_id)
        assert (done.status, done.attempt, done.failures, done.last_error) == (JobStatus.SUCCESS, 1, 0, None)


def test_a_handler_raising_retry_later_retries_every_unmarked_job(store: JobStore, clock: ManualClock) -> None:
    def handler(batch: Batch) -> None:
        batch.fail(batch.by_resource["port-000"], "its own error")
        raise RetryLater("RegionTwo unreachable", delay=5)

    runner = make_runner(store, _batch_registry(handler), policy=NO_JITTER)
    _enqueue(store, 4)
    clock.advance(WINDOW)
    runner.run_due()
    marked = found(store, "bulk", "port-000")
    assert marked.failures == 1 and marked.last_error == "its own error"
    for n in (1, 2, 3):
        job = found(store, "bulk", f"port-00{n}")
        assert (job.status, job.failures, job.last_error) == (JobStatus.NEW, 0, "retry later: RegionTwo unreachable")
        assert job.run_after == clock.now() + timedelta(seconds=5)


@pytest.mark.parametrize(("raised", "status", "failures", "last_error"), [
    (RuntimeError("bulk call failed"), JobStatus.NEW, 1, "RuntimeError: bulk call failed"),
    (PermanentFailure("bad type"), JobStatus.FAIL, 1, "PermanentFailure: bad type"),
])
def test_a_handler_error_is_a_failure_of_every_unmarked_job(
    store: JobStore, clock: ManualClock, raised: Exception, status: JobStatus, failures: int, last_error: str
) -> None:
    def handler(batch: Batch) -> None:
        raise raised

    runner = make_runner(store, _batch_registry(handler), policy=NO_JITTER)
    _enqueue(store, 3)
    clock.advance(WINDOW)
    runner.run_due()
    for n in range(3):
        job = found(store, "bulk", f"port-00{n}")
        assert (job.status, job.failures, job.last_error) == (status, failures, last_error)


def test_past_the_deadline_every_unmarked_job_is_stopped(store: JobStore, clock: ManualClock) -> None:
    neutron, http = _region()
    seen: list[str | None] = []

    def handler(batch: Batch) -> None:
        batch.retry_later(batch.by_resource["port-000"], "not yet", delay=1)
        neutron.get("networks", "net-1")
        clock.advance(31)
        seen.append(batch.stop_reason())
        neutron.get("networks", "net-1")  # never sent: the guard checks the batch
        raise AssertionError("not reached")

    runner = make_runner(store, _batch_registry(handler, deadline=30), policy=NO_JITTER, lease_seconds=1000)
    _enqueue(store, 3)
    clock.advance(WINDOW)
    runner.run_due()
    assert len(http.calls) == 1 and seen == ["run deadline passed"]
    first = found(store, "bulk", "port-000")
    assert first.last_error == "retry later: not yet" and first.run_after == clock.now() + timedelta(seconds=1)
    for n in (1, 2):
        job = found(store, "bulk", f"port-00{n}")
        assert (job.status, job.failures) == (JobStatus.NEW, 0)
        assert job.last_error == "retry later: stopped: run deadline passed"
        assert job.run_after == clock.now() + timedelta(seconds=10)  # the type's backoff


def test_a_lost_lease_drops_only_that_jobs_outcome(store: JobStore, clock: ManualClock) -> None:
    neutron, http = _region()
    go_on, done = threading.Event(), threading.Event()
    seen: list[Any] = []

    def handler(batch: Batch) -> None:
        go_on.wait(10)
        seen.append((batch.should_stop(), [ctx.resource_id for ctx in batch.live()]))
        neutron.get("networks", "net-1")  # still sent: the other jobs go on
        for ctx in batch.items:
            if not ctx.lease_held():
                batch.fail(ctx, "marked, but dropped")
        done.set()

    job_type = kind()
    registry = HandlerRegistry()
    registry.register_batch(job_type, handler, window=0)
    worker = Worker(store, registry, WorkerSettings(lease_seconds=30, owner="worker-a"), NO_JITTER)
    for n in range(3):
        store.enqueue(job_type, f"port-{n}")
    claims = worker.runner.claim_batch(job_type)
    assert len(claims) == 3
    worker._start_batch(claims)
    assert worker._slots_taken() == 1 and sorted(worker.running_jobs) == sorted(c.job.id for c in claims)

    clock.advance(31)  # no renewal came in time; worker-b takes the oldest job over
    other = Leases(store.engine, clock, "worker-b", 30)
    [taken] = other.claim_batch(job_type, NO_JITTER, 1, 0)
    worker._renew_all()  # the others' leases are renewed, the taken one is marked lost
    [entry] = worker._running.values()
    assert [item.lease.lost for item in entry.items] == [c.job.id == taken.job.id for c in claims]
    assert not entry.stop.is_set()

    go_on.set()
    assert done.wait(10)
    wait_for(lambda: not worker.running_jobs)
    [(stopping, live)] = seen
    assert not stopping and taken.job.resource_id not in live and len(live) == 2
    assert len(http.calls) == 1
    for claim in claims:
        job = store.get(claim.job.id)
        if claim.job.id == taken.job.id:  # worker-b's, untouched by worker-a
            assert job.lease_owner == "worker-b" and job.version == taken.job.version
        else:
            assert job.status is JobStatus.SUCCESS
    assert value("isthmus_job_runs_total", type=job_type, outcome="lease_lost") == 1
    assert value("isthmus_job_runs_total", type=job_type, outcome="success") == 2


def test_a_batch_stops_once_every_lease_is_gone(store: JobStore, clock: ManualClock) -> None:
    runs: list[str | None] = []

    def handler(batch: Batch) -> None:
        clock.advance(31)  # no renewal: every lease expired
        runs.append(batch.stop_reason())
        batch.check()

    runner = make_runner(store, _batch_registry(handler), lease_seconds=30)
    _enqueue(store, 2)
    clock.advance(WINDOW)
    runner.run_due()
    assert runs == ["every lease of the batch lost or expired"]
    # Still ours (nobody took them over): stopped, never a failure.
    assert {(j.status, j.failures) for j in store.list()} == {(JobStatus.NEW, 0)}


# -- metrics ---------------------------------------------------------------------------------------


def test_batch_sizes_and_per_job_outcomes_are_observed(store: JobStore, clock: ManualClock) -> None:
    job_type = kind()

    def handler(batch: Batch) -> None:
        batch.retry_later(batch.items[0], "later")

    registry = HandlerRegistry()
    registry.register_batch(job_type, handler, max_size=3, window=0)
    runner = make_runner(store, registry)
    _enqueue(store, 5, job_type)
    assert runner.run_due() == 5
    assert value("isthmus_job_batch_size_count", type=job_type) == 2
    assert value("isthmus_job_batch_size_sum", type=job_type) == 5
    assert value("isthmus_job_batch_size_bucket", type=job_type, le="2.0") == 1
    assert value("isthmus_job_runs_total", type=job_type, outcome="success") == 3
    assert value("isthmus_job_runs_total", type=job_type, outcome="retry_later") == 2
    assert value("isthmus_job_retries_total", type=job_type, reason="retry_later") == 2
    assert value("isthmus_job_run_seconds_count", type=job_type) == 5


# -- the worker ----------------------------------------------------------------------------------


def test_the_dispatcher_knows_when_a_window_closes(store: JobStore, clock: ManualClock) -> None:
    runs = Runs()
    worker = Worker(store, _batch_registry(runs.record, window=0.5), WorkerSettings(concurrency=2), NO_JITTER)
    _enqueue(store, 3)
    clock.advance(0.2)
    assert worker._dispatch() == pytest.approx(0.3)
    assert worker.running_jobs == []
    clock.advance(0.3)
    worker._dispatch()
    wait_for(lambda: runs.sizes == [3])
    wait_for(lambda: not worker.running_jobs)
    assert worker._dispatch() is None  # nothing waits


def test_a_worker_wakes_when_the_window_passes_not_at_the_next_poll(sqlite_url: str) -> None:
    runs = Runs()
    engine = make_engine(sqlite_url)
    store = JobStore(engine)
    # Polls and renewals 30 s apart: only the window's own wake-up runs the batch in time.
    settings = WorkerSettings(concurrency=1, owner="w", poll_interval=60, lease_seconds=90, shutdown_grace=2)
    worker = Worker(store, _batch_registry(runs.record, window=1.0), settings, NO_JITTER)
    enqueued = time.monotonic()
    ids = _enqueue(store, 3)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: runs.sizes == [3], timeout=15)
        assert time.monotonic() - enqueued >= 0.9  # not before the window (clocks may differ by a hair)
    finally:
        worker.request_stop()
        thread.join(10)
        engine.dispose()
    assert sorted(runs.batches[0]) == ids


class Slots:
    """Counts the handler runs in flight and every run of each resource."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0
        self.runs: Counter[str] = Counter()
        self.batch_sizes: list[int] = []

    def _enter(self, resources: list[str]) -> None:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.runs.update(resources)

    def _leave(self) -> None:
        time.sleep(0.01)
        with self.lock:
            self.active -= 1

    def batch(self, batch: Batch) -> None:
        self._enter([ctx.resource_id for ctx in batch.items])
        with self.lock:
            self.batch_sizes.append(len(batch))
        self._leave()

    def plain(self, ctx: JobContext) -> None:
        self._enter([ctx.resource_id])
        self._leave()


def _idle(store: JobStore) -> bool:
    counts = store.counts()
    return counts[JobStatus.NEW] == 0 and counts[JobStatus.RUNNING] == 0


def test_a_batch_type_and_a_plain_type_share_the_slots(sqlite_url: str) -> None:
    slots = Slots()
    registry = HandlerRegistry()
    registry.register_batch("bulk", slots.batch, max_size=10, window=0.5)
    registry.register("sync", slots.plain)
    engine = make_engine(sqlite_url)
    store = JobStore(engine)
    worker = Worker(store, registry, WorkerSettings(concurrency=2, owner="w", poll_interval=0.01, shutdown_grace=2))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        bulk = _enqueue(store, 30)
        plain = [store.enqueue("sync", f"net-{n}").resource_id for n in range(10)]
        wait_for(lambda: _idle(store))
        statuses = {j.status for j in store.list(limit=100)}
    finally:
        worker.request_stop()
        thread.join(10)
        engine.dispose()
    assert slots.runs == Counter(bulk + plain)  # every job ran, exactly once
    assert slots.peak <= 2  # a batch took one slot, whatever its size
    assert sum(slots.batch_sizes) == 30 and 1 < max(slots.batch_sizes) <= 10
    assert statuses == {JobStatus.SUCCESS}


def test_two_workers_on_one_sqlite_file_run_each_job_once(sqlite_url: str) -> None:
    slots = Slots()
    registry = HandlerRegistry()
    registry.register_batch("bulk", slots.batch, max_size=25, window=0.05)
    engines = [make_engine(sqlite_url) for _ in range(3)]
    workers = [Worker(JobStore(e), registry, WorkerSettings(concurrency=2, owner=f"w{i}", poll_interval=0.01,
                                                            shutdown_grace=2)) for i, e in enumerate(engines[:2])]
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for t in threads:
        t.start()
    producer = JobStore(engines[2])
    try:
        ids = _enqueue(producer, 200)
        wait_for(lambda: _idle(producer), timeout=60)
    finally:
        for w in workers:
            w.request_stop()
        for t in threads:
            t.join(10)
    statuses = {j.status for j in producer.list(limit=1000)}
    for e in engines:
        e.dispose()
    assert slots.runs == Counter(ids)  # each handler call once per enqueue, across both workers
    assert statuses == {JobStatus.SUCCESS}
    assert max(slots.batch_sizes) <= 25


def test_stopped_raised_by_one_context_is_the_whole_runs(store: JobStore, clock: ManualClock) -> None:
    """A handler that lets one job's Stopped out gives it to every unmarked job: it
    is a stop, never a failure."""
    def handler(batch: Batch) -> None:
        raise Stopped("region call refused")

    runner = make_runner(store, _batch_registry(handler), policy=NO_JITTER)
    _enqueue(store, 2)
    clock.advance(WINDOW)
    runner.run_due()
    assert {(j.failures, j.last_error) for j in store.list()} == {(0, "retry later: stopped: region call refused")}
