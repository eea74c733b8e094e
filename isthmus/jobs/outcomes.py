"""What one run of one job came to, before the runner stores it.

A plain handler's outcome is what it raised, or success if it returned. A batch
handler's outcome for a job is what it marked for that job, else what the whole
handler raised, else success. Both go through one mapping, so a job is retried,
backed off and failed the same way whichever kind of handler ran it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from isthmus.jobs.errors import PermanentFailure, RetryLater, Stopped

# The metrics labels of docs/metrics.md; "lease_lost" and "abandoned" are decided
# by the runner and the worker, never by the handler.
OutcomeName = Literal["success", "retry_later", "stopped", "failed", "permanent_failure"]


@dataclass(frozen=True)
class Outcome:
    name: OutcomeName
    reason: str | None = None  # a failure's last_error; why a retry or a stop
    delay: float | None = None  # retry_later / stopped: seconds until due again; None: the type's backoff


SUCCESS = Outcome("success")


def outcome_of(exc: Exception) -> Outcome:
    """The outcome of a handler that raised ``exc`` (docs/jobs.md, Failure handling)."""
    if isinstance(exc, Stopped):  # before RetryLater: it is one
        return Outcome("stopped", exc.reason, exc.delay)
    if isinstance(exc, RetryLater):
        return Outcome("retry_later", exc.reason, exc.delay)
    if isinstance(exc, PermanentFailure):
        return Outcome("permanent_failure", describe(exc))
    return Outcome("failed", describe(exc))


def retry_later(reason: str, delay: float | None = None) -> Outcome:
    if delay is not None and delay < 0:
        raise ValueError("retry delay must be >= 0")
    return Outcome("retry_later", reason, delay)


def failure(error: BaseException | str, *, permanent: bool = False) -> Outcome:
    """A failed attempt (backs off, FAIL once attempts are used up) or, if ``permanent``
    or a :class:`PermanentFailure`, FAIL at once. A message is kept as given; an
    exception as ``Type: message``, like one a handler raised."""
    reason = error if isinstance(error, str) else describe(error)
    permanent = permanent or isinstance(error, PermanentFailure)
    return Outcome("permanent_failure" if permanent else "failed", reason)


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
