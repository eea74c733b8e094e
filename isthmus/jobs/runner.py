"""Run one claimed job: call its handler and record the outcome.

Kept apart from the worker loop so tests (and a future "run inline" mode)
can drive jobs one by one with a manual clock.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from isthmus import callguard
from isthmus.jobs import metrics
from isthmus.jobs.backoff import RetryPolicy
from isthmus.jobs.errors import LeaseLost, PermanentFailure, RetryLater, Stopped
from isthmus.jobs.leases import Claim, Leases
from isthmus.jobs.models import Job, JobStatus
from isthmus.jobs.registry import DEFAULT_RUN_DEADLINE, HandlerRegistry, JobContext, LeaseWatch

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class Runner:
    leases: Leases
    registry: HandlerRegistry
    default_policy: RetryPolicy
    rand: Callable[[], float] | None = None  # jitter source; injectable for tests
    default_deadline: float = DEFAULT_RUN_DEADLINE  # of types that declare none

    def policies(self) -> dict[str, RetryPolicy]:
        return self.registry.policies(self.default_policy)

    def deadline_of(self, job_type: str) -> float:
        return self.registry.get(job_type).deadline or self.default_deadline

    def abandon(self, claim: Claim, reason: str) -> Job | None:
        """Record a run whose handler would not stop as a failed attempt (so a
        job that hangs every time ends in FAIL); None if the lease was lost."""
        spec = self.registry.get(claim.job.job_type)
        try:
            ended = self.leases.fail(claim, reason, spec.retry or self.default_policy, rand=self.rand)
        except LeaseLost:
            return None
        metrics.RUNS.labels(claim.job.job_type, "abandoned").inc()
        return ended

    def claim(self, limit: int) -> list[Claim]:
        return self.leases.claim(self.policies(), limit)

    def run(
        self, claim: Claim, stop: threading.Event | None = None, lease: LeaseWatch | None = None
    ) -> Job | None:
        """Run the handler and store the outcome; None if the lease was lost meanwhile.

        ``lease`` is the worker's view of the lease (renewals move it on); by
        default the claim's expiry, as nobody renews an inline run."""
        started = time.monotonic()
        outcome, ended = self._run(claim, stop, lease)
        metrics.observe_run(claim.job.job_type, outcome, time.monotonic() - started,
                            requeued=outcome in metrics.RETRY_OUTCOMES and ended is not None
                            and ended.status is JobStatus.NEW)
        return ended

    def _run(self, claim: Claim, stop: threading.Event | None, lease: LeaseWatch | None) -> tuple[str, Job | None]:
        """The run and its outcome's name (metrics label, docs/metrics.md)."""
        job = claim.job
        spec = self.registry.get(job.job_type)
        policy = spec.retry or self.default_policy
        deadline = self.leases.clock.now() + timedelta(seconds=self.deadline_of(job.job_type))
        lease = lease or LeaseWatch(job.lease_expires_at)
        ctx = _context(job, stop or threading.Event(), deadline, self.leases, lease)
        try:
            try:
                # Region clients check the context before each request: a run
                # whose lease or deadline is gone stops at its next call.
                with callguard.installed(lambda: ctx.check(shutdown=False)):
                    spec.handler(ctx)
            except Stopped as exc:
                if ctx.lease_lost():  # the new owner's outcome wins; write nothing
                    LOG.warning("job %s stopped: %s; outcome dropped", _label(job), exc.reason)
                    return "lease_lost", None
                delay = exc.delay if exc.delay is not None else policy.delay(job.attempt)
                LOG.warning("job %s stopped: %s; again in %.1fs", _label(job), exc.reason, delay)
                return "stopped", self.leases.retry_later(claim, delay, f"stopped: {exc.reason}")
            except RetryLater as exc:
                delay = exc.delay if exc.delay is not None else policy.delay(job.attempt)
                LOG.info("job %s retry later in %.1fs: %s", _label(job), delay, exc.reason)
                return "retry_later", self.leases.retry_later(claim, delay, exc.reason)
            except PermanentFailure as exc:
                LOG.error("job %s failed permanently: %s", _label(job), exc)
                return "permanent_failure", self.leases.fail(claim, _describe(exc), policy, permanent=True)
            except Exception as exc:  # noqa: BLE001 - any handler error is a job failure
                LOG.warning("job %s attempt %d failed: %s", _label(job), job.attempt, exc)
                LOG.debug("%s", traceback.format_exc())
                return "failed", self.leases.fail(claim, _describe(exc), policy, rand=self.rand)
            return "success", self.leases.succeed(claim)
        except LeaseLost:
            # Another worker took over after our lease expired; its outcome wins.
            LOG.warning("job %s: lease lost, outcome dropped", _label(job))
            return "lease_lost", None

    def run_due(self, limit: int = 100) -> int:
        """Claim and run due jobs inline, one after another; returns how many ran."""
        claims = self.claim(limit)
        for claim in claims:
            self.run(claim)
        return len(claims)


def _context(job: Job, stop: threading.Event, deadline: datetime, leases: Leases, lease: LeaseWatch) -> JobContext:
    return JobContext(
        job_id=job.id,
        job_type=job.job_type,
        resource_id=job.resource_id,
        project_id=job.project_id,
        payload=dict(job.payload),
        attempt=job.attempt,
        _stop=stop,
        deadline=deadline,
        _clock=leases.clock,
        _lease=lease,
    )


def _label(job: Job) -> str:
    return f"{job.id} ({job.job_type} {job.resource_id})"


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
