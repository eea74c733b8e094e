"""Batch handlers: one handler run over many due jobs of one type.

Events of one type that arrive within a short window (a network's ports created
together, an update storm) become one run, so its handler can make one bulk
call to a region instead of one per job. The batch shares only the run: each
job keeps its own row, lease, attempt count, retries, deadline and outcome.

    @registry.batch_handler("port_sync", max_size=200, window=0.05)
    def sync_ports(batch: Batch) -> None:
        found = region.list_ports(ids=[ctx.resource_id for ctx in batch.live()])
        for ctx in batch.live():
            if ctx.resource_id not in found:
                batch.retry_later(ctx, "not in the region yet", delay=5)
        # unmarked jobs succeed; raising gives every unmarked job that outcome

The engine claims a batch type's jobs as a group (``Leases.claim_batch``) once
the oldest of them has been due ``window`` seconds, and runs the group in one
worker slot (docs/jobs.md, Batch handlers).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from isthmus.jobs import outcomes
from isthmus.jobs.clock import Clock, SystemClock
from isthmus.jobs.errors import Stopped
from isthmus.jobs.outcomes import Outcome
from isthmus.jobs.registry import JobContext, seconds_left


@dataclass(eq=False)
class Batch:
    """What a batch handler gets: one :class:`JobContext` per claimed job (each with
    its own lease, all with the run's deadline), and where it records per-job
    outcomes.

    A job whose lease was lost (taken over by another worker) keeps nothing of
    this run, whatever was marked for it, and does not stop the others: the
    handler skips it (:meth:`live`, ``ctx.lease_held()``) and goes on. The run
    as a whole stops on its deadline, at shutdown, or once every lease is gone.
    """

    job_type: str
    items: tuple[JobContext, ...]
    deadline: datetime | None = None  # None: no deadline (a batch built outside the runner)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _clock: Clock = field(default_factory=SystemClock, repr=False)
    by_resource: Mapping[str, JobContext] = field(init=False, repr=False)
    _marks: dict[str, Outcome] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.items:
            raise ValueError("a batch holds at least one job")
        strangers = sorted({ctx.job_type for ctx in self.items} - {self.job_type})
        if strangers:
            raise ValueError(f"a batch of {self.job_type} holds jobs of {', '.join(strangers)}")
        # One row per (type, resource): within one type, resource ids are unique.
        self.by_resource = MappingProxyType({ctx.resource_id: ctx for ctx in self.items})

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[JobContext]:
        return iter(self.items)

    def live(self) -> tuple[JobContext, ...]:
        """The jobs whose lease this worker still holds: the ones worth working on."""
        return tuple(ctx for ctx in self.items if ctx.lease_held())

    # -- outcomes, per job -------------------------------------------------------------

    def retry_later(self, ctx: JobContext, reason: str, delay: float | None = None) -> None:
        """The job could not be done now (e.g. its region is down): due again after
        ``delay`` seconds, or the type's backoff; never a failure."""
        self._mark(ctx, outcomes.retry_later(reason, delay))

    def fail(self, ctx: JobContext, error: BaseException | str, permanent: bool = False) -> None:
        """A failed attempt of the job: it backs off and ends in FAIL once its attempts
        are used up; at once if ``permanent`` (or ``error`` is a PermanentFailure)."""
        self._mark(ctx, outcomes.failure(error, permanent=permanent))

    def raised(self, ctx: JobContext, exc: Exception) -> None:
        """The job gets what ``exc`` raised by a plain handler would give it (a retry,
        a failure, a permanent failure): for a part of the batch that failed, its jobs
        only."""
        self._mark(ctx, outcomes.outcome_of(exc))

    def outcome(self, ctx: JobContext) -> Outcome | None:
        """What the handler marked for the job so far; None: nothing (it succeeds,
        unless the handler raises)."""
        with self._lock:
            return self._marks.get(ctx.job_id)

    def _mark(self, ctx: JobContext, outcome: Outcome) -> None:
        # Identity, not equality: a context of another run of the same job is not ours.
        if self.by_resource.get(ctx.resource_id) is not ctx:
            raise ValueError(f"job {ctx.job_id} ({ctx.job_type} {ctx.resource_id}) is not in this batch")
        with self._lock:  # handlers may mark from threads of their own
            self._marks[ctx.job_id] = outcome  # the latest mark wins

    # -- stopping, for the whole run -----------------------------------------------------

    def remaining(self) -> float | None:
        """Seconds left before the run's deadline (negative once past); None without one."""
        return seconds_left(self.deadline, self._clock)

    def deadline_exceeded(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0

    def stop_reason(self) -> str | None:
        """Why the whole run must end now, or None."""
        return self._must_stop() or ("worker stopping" if self._stop.is_set() else None)

    def should_stop(self) -> bool:
        """True once the worker shuts down, the deadline passed, or no lease is left.

        A lost lease of one job is not a reason: that job's outcome is dropped
        and the handler goes on with the others."""
        return self.stop_reason() is not None

    def check(self, *, shutdown: bool = True) -> None:
        """Raise :class:`Stopped` if the run must end: every job not marked yet gets
        that outcome (never a failure). The runner's call guard passes
        ``shutdown=False``, as for a single job (JobContext.check)."""
        reason = self._must_stop()
        if reason is not None:
            raise Stopped(reason)  # again after the type's backoff
        if shutdown and self._stop.is_set():
            raise Stopped("worker stopping", delay=0.0)  # due again at once, on another worker

    def _must_stop(self) -> str | None:
        if self.deadline_exceeded():
            return "run deadline passed"
        if not any(ctx.lease_held() for ctx in self.items):
            return "every lease of the batch lost or expired"
        return None
