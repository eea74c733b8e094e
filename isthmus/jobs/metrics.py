"""Prometheus metrics of the job engine (docs/metrics.md).

Counters and the run-latency histogram live in the process's default registry
and are updated where the engine decides an outcome (runner, leases); the
job counts by type and state are read from the database at scrape time
(:class:`JobCountsCollector`), so every worker process reports the same
shared truth and a restarted worker loses nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from isthmus.jobs.models import JobStatus
from isthmus.jobs.schema import jobs

LOG = logging.getLogger(__name__)

# Runs last from milliseconds (nothing to do) to minutes (a region timing out).
RUN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

# outcome: success | retry_later | stopped | failed | permanent_failure | lease_lost | abandoned
RUNS = Counter("isthmus_job_runs", "Job runs ended, by job type and outcome", ("type", "outcome"))
RUN_SECONDS = Histogram("isthmus_job_run_seconds", "Seconds a job run took (handler and outcome write)",
                        ("type",), buckets=RUN_BUCKETS)
# A run that sends the job back to NEW for another run: RetryLater, a stop, or a
# failure with attempts left (a coalesced rerun after success is no retry).
RETRY_OUTCOMES = frozenset({"retry_later", "stopped", "failed"})
RETRIES = Counter("isthmus_job_retries", "Runs that scheduled their job to run again", ("type", "reason"))
TAKEOVERS = Counter("isthmus_job_lease_takeovers", "Jobs claimed after another worker's lease expired", ("type",))
# Jobs per batch run, from one (a lone event) to a type's max_size (a burst).
BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
BATCH_SIZE = Histogram("isthmus_job_batch_size", "Jobs per run of a batch handler", ("type",),
                       buckets=BATCH_BUCKETS)


def observe_run(job_type: str, outcome: str, seconds: float, requeued: bool) -> None:
    RUNS.labels(job_type, outcome).inc()
    RUN_SECONDS.labels(job_type).observe(seconds)
    if requeued:
        RETRIES.labels(job_type, outcome).inc()


def observe_batch(job_type: str, size: int) -> None:
    """One batch run; its jobs' outcomes are observed one by one (observe_run)."""
    BATCH_SIZE.labels(job_type).observe(size)


def serve(engine: Any, port: int, bind_host: str) -> tuple[Any, JobCountsCollector]:
    """``/metrics`` of a process with no HTTP server of its own (isthmus-xjob), in a
    daemon thread; the server and the registered job-count collector."""
    from prometheus_client import REGISTRY, start_http_server

    counts = JobCountsCollector(engine)
    REGISTRY.register(counts)
    server, _thread = start_http_server(port, addr=bind_host)
    return server, counts


def observe_takeover(job_type: str) -> None:
    TAKEOVERS.labels(job_type).inc()


class JobCountsCollector(Collector):
    """``isthmus_jobs{type, state}``: rows of the jobs table, read at each scrape."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def describe(self) -> list[Any]:
        return []  # dynamic: never collected at registration time

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("isthmus_jobs", "Jobs in the Isthmus database, by type and state",
                                   labels=("type", "state"))
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(sa.select(jobs.c.job_type, jobs.c.status, sa.func.count())
                                    .group_by(jobs.c.job_type, jobs.c.status)).all()
        except sa.exc.SQLAlchemyError as err:  # a scrape while the DB is down: no counts, no 500
            LOG.warning("job counts for metrics: %s", err)
            return
        seen: dict[str, set[str]] = {}
        for job_type, status, count in rows:
            family.add_metric((job_type, status), count)
            seen.setdefault(job_type, set()).add(status)
        for job_type, states in seen.items():  # every state of a known type, 0 when none
            for state in (s.value for s in JobStatus):
                if state not in states:
                    family.add_metric((job_type, state), 0)
        yield family
