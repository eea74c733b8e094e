"""Run claimed jobs: call their handler and record each job's outcome.

Kept apart from the worker loop so tests (and a future "run inline" mode)
can drive jobs one by one with a manual clock. A plain type runs one job per
handler call (:meth:`Runner.run`), a batch type many (:meth:`Runner.run_batch`);
either way each job's outcome is stored on its own row.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from isthmus import callguard
from isthmus.jobs import metrics
from isthmus.jobs.backoff import RetryPolicy
from isthmus.jobs.batch import Batch
from isthmus.jobs.errors import LeaseLost
from isthmus.jobs.leases import Claim, Leases
from isthmus.jobs.models import Job, JobStatus
from isthmus.jobs.outcomes import SUCCESS, Outcome, outcome_of
from isthmus.jobs.registry import (
    DEFAULT_RUN_DEADLINE,
    BatchHandler,
    BatchPolicy,
    Handler,
    HandlerRegistry,
    HandlerSpec,
    JobContext,
    LeaseWatch,
)

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

    def batch_policy(self, job_type: str) -> BatchPolicy:
        policy = self.registry.get(job_type).batch
        if policy is None:
            raise ValueError(f"job type {job_type!r} has no batch handler")
        return policy

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

    # -- claiming --------------------------------------------------------------------

    def claim(self, limit: int) -> list[Claim]:
        """Due jobs of the plain types; batch types are claimed by :meth:`claim_batch`."""
        return self.leases.claim(self.registry.plain_policies(self.default_policy), limit)

    def claim_batch(self, job_type: str, limit: int | None = None) -> list[Claim]:
        """The type's next batch (at most its ``max_size``, or ``limit``), or nothing
        while its oldest due job is inside the window."""
        batch = self.batch_policy(job_type)
        size = batch.max_size if limit is None else min(limit, batch.max_size)
        policy = self.registry.get(job_type).retry or self.default_policy
        return self.leases.claim_batch(job_type, policy, size, batch.window)

    # -- running ---------------------------------------------------------------------

    def run(
        self, claim: Claim, stop: threading.Event | None = None, lease: LeaseWatch | None = None
    ) -> Job | None:
        """Run the handler and store the outcome; None if the lease was lost meanwhile.

        ``lease`` is the worker's view of the lease (renewals move it on); by
        default the claim's expiry, as nobody renews an inline run. A job of a
        batch type runs as a batch of one."""
        spec = self.registry.get(claim.job.job_type)
        if spec.batch is not None:
            return self.run_batch([claim], stop, None if lease is None else [lease])[0]
        started = time.monotonic()
        ctx = _context(claim.job, stop or threading.Event(), self._deadline(spec), self.leases, lease)
        handler = cast(Handler, spec.handler)
        outcome = _call(lambda: handler(ctx), lambda: ctx.check(shutdown=False), _label(claim.job))
        return self._settle(claim, ctx, spec, outcome, started)

    def run_batch(
        self,
        claims: Sequence[Claim],
        stop: threading.Event | None = None,
        leases: Sequence[LeaseWatch] | None = None,
    ) -> list[Job | None]:
        """Run a batch type's handler once over ``claims`` (one type) and store each
        job's outcome: what the handler marked for it, else what the handler
        raised, else success. Returns each job as stored, None where its lease was
        lost. ``leases``: the worker's view of each claim's lease, in order."""
        if not claims:
            return []
        spec = self.registry.get(claims[0].job.job_type)
        if spec.batch is None:
            raise ValueError(f"job type {spec.job_type!r} has no batch handler")
        if leases is not None and len(leases) != len(claims):
            raise ValueError("one lease watch per claim")
        started = time.monotonic()
        stop = stop or threading.Event()
        deadline = self._deadline(spec)
        watches: Sequence[LeaseWatch | None] = leases if leases is not None else [None] * len(claims)
        contexts = tuple(_context(c.job, stop, deadline, self.leases, w) for c, w in zip(claims, watches, strict=True))
        batch = Batch(spec.job_type, contexts, deadline, _stop=stop, _clock=self.leases.clock)
        metrics.observe_batch(spec.job_type, len(claims))
        handler = cast(BatchHandler, spec.handler)
        # Region clients check the batch before each request: its deadline and
        # the worker's stop end the whole run; one job's lost lease does not.
        raised = _call(lambda: handler(batch), lambda: batch.check(shutdown=False),
                       f"batch of {len(claims)} {spec.job_type} jobs")
        return [self._settle(claim, ctx, spec, batch.outcome(ctx) or raised, started)
                for claim, ctx in zip(claims, contexts, strict=True)]

    def run_due(self, limit: int = 100) -> int:
        """Claim and run due jobs inline, one run after another: batches of each batch
        type first, then plain jobs. Returns how many jobs ran (at most ``limit``)."""
        ran = 0
        for job_type in self.registry.batch_types():
            ran += self._run_batches(job_type, limit - ran)
        claims = self.claim(limit - ran)
        for claim in claims:
            self.run(claim)
        return ran + len(claims)

    def _run_batches(self, job_type: str, limit: int) -> int:
        # Until a claim comes back short: the type had no more ripe jobs then, and
        # jobs a batch sent back due at once wait for the next call, as plain ones do.
        ran = 0
        while ran < limit:
            size = min(limit - ran, self.batch_policy(job_type).max_size)
            claims = self.claim_batch(job_type, size)
            if claims:
                self.run_batch(claims)
                ran += len(claims)
            if len(claims) < size:
                break
        return ran

    # -- outcomes --------------------------------------------------------------------

    def _deadline(self, spec: HandlerSpec) -> datetime:
        return self.leases.clock.now() + timedelta(seconds=self.deadline_of(spec.job_type))

    def _settle(self, claim: Claim, ctx: JobContext, spec: HandlerSpec, outcome: Outcome,
                started: float) -> Job | None:
        """Store one job's outcome and count it (docs/metrics.md)."""
        name, ended = self._store(claim, ctx, spec.retry or self.default_policy, outcome)
        requeued = name in metrics.RETRY_OUTCOMES and ended is not None and ended.status is JobStatus.NEW
        metrics.observe_run(claim.job.job_type, name, time.monotonic() - started, requeued=requeued)
        return ended

    def _store(self, claim: Claim, ctx: JobContext, policy: RetryPolicy, outcome: Outcome) -> tuple[str, Job | None]:
        """The job as stored and the outcome's name; nothing is stored once the lease
        is lost (another worker's outcome wins)."""
        job = claim.job
        if ctx.lease_lost():
            LOG.warning("job %s: lease lost (%s), outcome dropped", _label(job), outcome.name)
            return "lease_lost", None
        try:
            return outcome.name, self._write(claim, policy, outcome)
        except LeaseLost:
            # Another worker took over after our lease expired; its outcome wins.
            LOG.warning("job %s: lease lost, outcome dropped", _label(job))
            return "lease_lost", None

    def _write(self, claim: Claim, policy: RetryPolicy, outcome: Outcome) -> Job:
        job = claim.job
        reason = outcome.reason or outcome.name
        if outcome.name == "success":
            return self.leases.succeed(claim)
        if outcome.name in ("stopped", "retry_later"):
            delay = outcome.delay if outcome.delay is not None else policy.delay(job.attempt)
            if outcome.name == "stopped":
                LOG.warning("job %s stopped: %s; again in %.1fs", _label(job), reason, delay)
                return self.leases.retry_later(claim, delay, f"stopped: {reason}")
            LOG.info("job %s retry later in %.1fs: %s", _label(job), delay, reason)
            return self.leases.retry_later(claim, delay, reason)
        if outcome.name == "permanent_failure":
            LOG.error("job %s failed permanently: %s", _label(job), reason)
            return self.leases.fail(claim, reason, policy, permanent=True)
        LOG.warning("job %s attempt %d failed: %s", _label(job), job.attempt, reason)
        return self.leases.fail(claim, reason, policy, rand=self.rand)


def _call(invoke: Callable[[], object], guard: callguard.Guard, label: str) -> Outcome:
    """Call a handler with the call guard installed; what it came to."""
    try:
        with callguard.installed(guard):
            invoke()
    except Exception as exc:  # noqa: BLE001 - any handler error is an outcome of its job(s)
        outcome = outcome_of(exc)
        if outcome.name == "failed":
            LOG.debug("%s raised:\n%s", label, traceback.format_exc())
        return outcome
    return SUCCESS


def _context(job: Job, stop: threading.Event, deadline: datetime, leases: Leases,
             lease: LeaseWatch | None) -> JobContext:
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
        _lease=lease or LeaseWatch(job.lease_expires_at),
    )


def _label(job: Job) -> str:
    return f"{job.id} ({job.job_type} {job.resource_id})"
