"""Several workers as threads on one database: one runner per key, no lost events."""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from isthmus.jobs import (
    HandlerRegistry,
    JobFilter,
    JobStatus,
    JobStore,
    ManualClock,
    RetryPolicy,
    Worker,
    WorkerSettings,
    make_engine,
)
from isthmus.jobs.models import ResourceRef
from isthmus.jobs.periodic import ResyncScheduler
from isthmus.jobs.registry import Resync

from .helpers import found, make_runner, wait_for

FAST: dict[str, Any] = dict(poll_interval=0.01, lease_seconds=30.0, shutdown_grace=2.0)


class KeyGuard:
    """Records handler runs and any moment two runs of one key overlap."""

    def __init__(self) -> None:
        self.locks: dict[str, threading.Lock] = defaultdict(threading.Lock)
        self.meta = threading.Lock()
        self.violations: list[str] = []
        self.runs: dict[str, list[int]] = defaultdict(list)

    def handler(self, ctx) -> None:
        with self.meta:
            lock = self.locks[ctx.resource_id]
        if not lock.acquire(blocking=False):
            self.violations.append(ctx.resource_id)
            return
        try:
            with self.meta:
                self.runs[ctx.resource_id].append(ctx.payload["seq"])
            time.sleep(0.003)  # give other workers a chance to collide
        finally:
            lock.release()


def _start(workers: list[Worker]) -> list[threading.Thread]:
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for t in threads:
        t.start()
    return threads


def _stop(workers: list[Worker], threads: list[threading.Thread]) -> None:
    for w in workers:
        w.request_stop()
    for t in threads:
        t.join(timeout=10)
        assert not t.is_alive()


def _idle(store: JobStore) -> bool:
    counts = store.counts()
    return counts[JobStatus.NEW] == 0 and counts[JobStatus.RUNNING] == 0


def test_one_runner_per_key_across_worker_threads(db_url: str) -> None:
    guard = KeyGuard()
    registry = HandlerRegistry()
    registry.register("sync", guard.handler)
    engines = [make_engine(db_url) for _ in range(3)]
    workers = [
        Worker(JobStore(e), registry, WorkerSettings(concurrency=2, owner=f"w{i}", **FAST))
        for i, e in enumerate(engines)
    ]
    threads = _start(workers)
    producer = JobStore(engines[0])
    last_seq: dict[str, int] = {}
    rnd = random.Random(7)
    try:
        for seq in range(60):
            key = f"net-{rnd.randrange(6)}"
            producer.enqueue("sync", key, payload={"seq": seq})
            last_seq[key] = seq
            time.sleep(0.002)
        wait_for(lambda: _idle(producer))
    finally:
        _stop(workers, threads)
        for e in engines:
            e.dispose()
    assert guard.violations == []
    assert set(guard.runs) == set(last_seq)
    for key, seqs in guard.runs.items():
        assert seqs[-1] == last_seq[key]  # the newest event was always reconciled
        assert seqs == sorted(seqs)
    assert sum(len(s) for s in guard.runs.values()) <= 60  # coalesced, never amplified
    assert {j.status for j in producer.list(limit=100)} == {JobStatus.SUCCESS}


def test_leases_are_renewed_while_a_long_handler_runs(sqlite_url: str) -> None:
    runs: list[str] = []
    registry = HandlerRegistry()

    @registry.handler("slow")
    def slow(ctx) -> None:
        runs.append(ctx.job_id)
        time.sleep(4.0)  # four lease periods of 1 s, renewed every 0.33 s (a loaded machine starves threads)

    engine = make_engine(sqlite_url)
    settings: dict[str, Any] = dict(poll_interval=0.01, lease_seconds=1.0, shutdown_grace=2.0)
    workers = [Worker(JobStore(engine), registry, WorkerSettings(concurrency=1, owner=f"w{i}", **settings))
               for i in range(2)]
    threads = _start(workers)
    store = JobStore(engine)
    try:
        job = store.enqueue("slow", "net-1")
        wait_for(lambda: store.get(job.id).status is JobStatus.SUCCESS)
    finally:
        _stop(workers, threads)
        engine.dispose()
    assert runs == [job.id]
    assert store.get(job.id).attempt == 1 and store.get(job.id).failures == 0


def test_graceful_stop_lets_a_cooperative_job_finish(engine: Engine) -> None:
    started, finished = threading.Event(), []
    registry = HandlerRegistry()

    @registry.handler("sync")
    def cooperative(ctx) -> None:
        started.set()
        while not ctx.should_stop():
            time.sleep(0.005)
        finished.append(ctx.resource_id)

    store = JobStore(engine)
    worker = Worker(store, registry, WorkerSettings(concurrency=1, owner="w", **FAST))
    [thread] = _start([worker])
    job = store.enqueue("sync", "net-1")
    assert started.wait(10)
    _stop([worker], [thread])
    assert finished == ["net-1"]
    assert store.get(job.id).status is JobStatus.SUCCESS


def test_stop_releases_a_job_that_outlives_the_grace(engine: Engine) -> None:
    started, unblock = threading.Event(), threading.Event()
    registry = HandlerRegistry()

    @registry.handler("sync")
    def stuck(ctx) -> None:
        started.set()
        unblock.wait(10)  # ignores should_stop()

    store = JobStore(engine)
    settings = WorkerSettings(concurrency=1, owner="w", poll_interval=0.01, lease_seconds=30, shutdown_grace=0.05)
    worker = Worker(store, registry, settings)
    [thread] = _start([worker])
    job = store.enqueue("sync", "net-1")
    assert started.wait(10)
    _stop([worker], [thread])
    released = store.get(job.id)
    assert released.status is JobStatus.NEW and released.lease_owner is None
    unblock.set()  # the late outcome must not overwrite the release
    wait_for(lambda: worker.running_jobs == [])
    assert store.get(job.id).status is JobStatus.NEW


def test_periodic_resync_reenqueues_once_per_interval(store: JobStore, clock: ManualClock) -> None:
    desired = [ResourceRef("net-1", "p1"), ResourceRef("net-2", "p1", {"pod": "RegionTwo"})]
    runs: list[str] = []
    registry = HandlerRegistry()
    registry.register(
        "sync", lambda ctx: runs.append(ctx.resource_id), resync=Resync(60.0, lambda: list(desired))
    )
    a = ResyncScheduler(store, registry, "worker-a")
    b = ResyncScheduler(store, registry, "worker-b")
    runner = make_runner(store, registry, policy=RetryPolicy(jitter=0))

    assert a.tick() == 2  # first tick is immediate
    assert b.tick() == 0  # worker-a owns this tick
    assert runner.run_due() == 2
    clock.advance(59)
    assert a.tick() == 0 and b.tick() == 0
    clock.advance(1)
    assert b.tick() == 2 and a.tick() == 0
    assert runner.run_due() == 2  # drift repair: finished jobs are re-armed
    desired.append(ResourceRef("net-3"))
    clock.advance(60)
    a.tick()
    assert a.tick() == 0
    assert store.counts(JobFilter(status="NEW"))[JobStatus.NEW] == 3
    assert runner.run_due() == 3
    assert sorted(runs) == ["net-1"] * 3 + ["net-2"] * 3 + ["net-3"]


def test_a_shortened_resync_interval_applies_at_once(store: JobStore, clock: ManualClock) -> None:
    """A worker restarted with a shorter interval does not wait out the longer one
    a previous worker scheduled."""
    def scheduler(interval: float) -> ResyncScheduler:
        registry = HandlerRegistry()
        registry.register("sync", lambda ctx: None, resync=Resync(interval, lambda: [ResourceRef("net-1")]))
        return ResyncScheduler(store, registry, "w")

    assert scheduler(3600.0).tick() == 1
    clock.advance(10)
    assert scheduler(3600.0).tick() == 0
    short = scheduler(5.0)
    assert short.tick() == 1
    assert short.tick() == 0
    clock.advance(5)
    assert short.tick() == 1


def test_a_failing_resync_lister_does_not_break_the_scheduler(store: JobStore, clock: ManualClock) -> None:
    def broken():
        yield ResourceRef("net-1")
        raise ConnectionError("central neutron down")

    registry = HandlerRegistry()
    registry.register("sync", lambda ctx: None, resync=Resync(10.0, broken))
    scheduler = ResyncScheduler(store, registry, "w")
    assert scheduler.tick() == 1
    assert found(store, "sync", "net-1").status is JobStatus.NEW
    clock.advance(10)
    assert scheduler.tick() == 1


def test_registry_rejects_duplicates_and_bad_intervals() -> None:
    registry = HandlerRegistry()
    registry.register("sync", lambda ctx: None)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("sync", lambda ctx: None)
    with pytest.raises(ValueError):
        Resync(0, list)
    assert registry.job_types() == ("sync",) and "sync" in registry and len(registry) == 1
