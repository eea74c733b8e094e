"""Prometheus metrics of the job engine after known work (SQLite, manual clock)."""

from __future__ import annotations

import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY, CollectorRegistry

from isthmus.jobs import HandlerRegistry, JobStore, ManualClock, PermanentFailure, RetryLater, make_engine, metrics

from .helpers import make_runner


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[JobStore]:
    engine = make_engine(sqlite_url)
    yield JobStore(engine, ManualClock())
    engine.dispose()


def kind() -> str:
    """A job type of this test only: the default registry is process-wide."""
    return f"t{uuid.uuid4().hex[:8]}"


def test_runs_outcomes_latency_and_retries(sqlite_store: JobStore) -> None:
    ok, later, broken, doomed = kind(), kind(), kind(), kind()
    registry = HandlerRegistry()
    registry.register(ok, lambda ctx: None)
    registry.register(later, lambda ctx: (_ for _ in ()).throw(RetryLater("region down")))
    registry.register(broken, lambda ctx: 1 / 0)
    registry.register(doomed, lambda ctx: (_ for _ in ()).throw(PermanentFailure("no")))
    runner = make_runner(sqlite_store, registry)
    for n in range(5):
        sqlite_store.enqueue(ok, f"net-{n}")
    for job_type in (later, broken, doomed):
        sqlite_store.enqueue(job_type, "x")
    assert runner.run_due() == 8

    assert value("isthmus_job_runs_total", type=ok, outcome="success") == 5
    assert value("isthmus_job_run_seconds_count", type=ok) == 5
    assert value("isthmus_job_run_seconds_bucket", type=ok, le="+Inf") == 5
    assert value("isthmus_job_runs_total", type=later, outcome="retry_later") == 1
    assert value("isthmus_job_retries_total", type=later, reason="retry_later") == 1
    assert value("isthmus_job_runs_total", type=broken, outcome="failed") == 1
    assert value("isthmus_job_retries_total", type=broken, reason="failed") == 1  # attempts left
    assert value("isthmus_job_runs_total", type=doomed, outcome="permanent_failure") == 1
    assert value("isthmus_job_retries_total", type=doomed, reason="permanent_failure") == 0
    assert value("isthmus_job_retries_total", type=ok, reason="success") == 0


def test_lease_takeover_counted(sqlite_store: JobStore) -> None:
    job_type = kind()
    registry = HandlerRegistry()
    registry.register(job_type, lambda ctx: None)
    a = make_runner(sqlite_store, registry, owner="worker-a", lease_seconds=30)
    b = make_runner(sqlite_store, registry, owner="worker-b", lease_seconds=30)
    sqlite_store.enqueue(job_type, "net-1")
    [claim_a] = a.claim(5)
    clock = sqlite_store.clock
    assert isinstance(clock, ManualClock)
    clock.advance(31)
    [claim_b] = b.claim(5)
    assert value("isthmus_job_lease_takeovers_total", type=job_type) == 1
    assert a.run(claim_a) is None
    assert value("isthmus_job_runs_total", type=job_type, outcome="lease_lost") == 1
    b.run(claim_b)
    assert value("isthmus_job_runs_total", type=job_type, outcome="success") == 1


def run_noop_jobs(store: JobStore, count: int, limit: int = 100) -> str:
    """Enqueue ``count`` jobs of a fresh no-op type and run up to ``limit`` of them; the type."""
    job_type = kind()
    registry = HandlerRegistry()
    registry.register(job_type, lambda ctx: None)
    for n in range(count):
        store.enqueue(job_type, f"net-{n}")
    make_runner(store, registry).run_due(limit)
    return job_type


def test_job_counts_by_type_and_state(sqlite_store: JobStore) -> None:
    job_type = run_noop_jobs(sqlite_store, 3, limit=2)
    scrape = CollectorRegistry()
    scrape.register(metrics.JobCountsCollector(sqlite_store.engine))
    assert scrape.get_sample_value("isthmus_jobs", {"type": job_type, "state": "SUCCESS"}) == 2
    assert scrape.get_sample_value("isthmus_jobs", {"type": job_type, "state": "NEW"}) == 1
    assert scrape.get_sample_value("isthmus_jobs", {"type": job_type, "state": "FAIL"}) == 0


def test_database_down_yields_no_counts_not_an_error(tmp_path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path}/missing-dir/none.sqlite")
    assert list(metrics.JobCountsCollector(engine).collect()) == []


@pytest.mark.component  # the metrics endpoint over HTTP (tests/tiers.py)
def test_metrics_endpoint_scraped_after_work(sqlite_store: JobStore) -> None:
    job_type = run_noop_jobs(sqlite_store, 4)
    server, counts = metrics.serve(sqlite_store.engine, 0, "127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    finally:
        server.shutdown()
        server.server_close()
        REGISTRY.unregister(counts)
    assert f'isthmus_jobs{{state="SUCCESS",type="{job_type}"}} 4.0' in text
    assert f'isthmus_job_runs_total{{outcome="success",type="{job_type}"}} 4.0' in text
    assert f'isthmus_job_run_seconds_count{{type="{job_type}"}} 4.0' in text


def test_worker_option_defaults_off() -> None:
    from oslo_config import cfg

    from isthmus.jobs import config

    conf = cfg.ConfigOpts()
    config.register_opts(conf)
    conf([])
    assert conf.metrics.port == 0 and conf.metrics.bind_host == "127.0.0.1"
