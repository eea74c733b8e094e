"""Exceptions of the job engine.

Two families: what a *handler* raises to steer the engine (``RetryLater``,
``PermanentFailure``) and what the *engine* raises to its callers (``JobError``
and subclasses), which a future Admin API maps to HTTP codes.
"""

from __future__ import annotations


class RetryLater(Exception):
    """Raised by a handler: the job could not run now (e.g. region unreachable).

    Not counted as a failure: the job stays NEW and runs again after ``delay``
    seconds (or the type's backoff), however long the outage lasts.
    """

    def __init__(self, reason: str = "retry later", delay: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay


class Stopped(RetryLater):
    """The run must end early: the worker is stopping, the job's lease was lost
    or has expired, or its run deadline passed.

    Raised by ``JobContext.check()`` and, through the call guard the runner
    installs, by the next region call. Like ``RetryLater`` it never counts as
    a failure; a run whose lease is gone records nothing at all.
    """


class PermanentFailure(Exception):
    """Raised by a handler: retrying cannot help (bad payload, resource gone for good).

    The job goes to FAIL at once, keeping the message as its last error.
    """


class JobError(Exception):
    """Base of the errors the engine raises to its callers."""


class InvalidJobRequest(JobError, ValueError):
    """A request names an empty or oversized field, or an unknown status (API: 400)."""


class JobNotFound(JobError, LookupError):
    """No job with that id (API: 404)."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id} not found")
        self.job_id = job_id


class InvalidJobState(JobError):
    """The operation is not allowed in the job's current status (API: 400)."""

    def __init__(self, job_id: str, status: str, operation: str) -> None:
        super().__init__(f"cannot {operation} job {job_id} in status {status}")
        self.job_id = job_id
        self.status = status
        self.operation = operation


class LeaseLost(JobError):
    """This worker no longer holds the job's lease: another worker took it over."""


class UnknownJobType(JobError, KeyError):
    """No handler is registered for the job type."""


class ConcurrentUpdate(JobError):
    """A compare-and-set kept losing to concurrent writers; the caller may retry."""
