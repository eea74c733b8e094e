"""The job state machine as pure functions: (current record, event) -> new column values.

Persistence applies the returned values with a compare-and-set on ``version``,
so a transition is computed from exactly the row it replaces; no transition
ever needs a lock or dialect-specific SQL.

    enqueue          claim            success / permanent / exhausted
    -------> NEW  -----------> RUNNING ------------------------------> SUCCESS | FAIL
              ^                  |  |                                      |
              |  error (backoff) |  |  enqueue while running: rerun=True   | enqueue / redo
              +------------------+  |  => NEW (fresh cycle) instead of     |
              |  RetryLater, release|     SUCCESS/FAIL when it ends        |
              +---------------------+                                      |
              +------------------------------------------------------------+
    RUNNING with an expired lease is claimable again (counts as one failure).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from isthmus.jobs.backoff import RetryPolicy
from isthmus.jobs.errors import InvalidJobState
from isthmus.jobs.models import HINTS, Job, JobRequest, JobStatus

Values = dict[str, Any]

_NO_LEASE: Values = {"lease_owner": None, "lease_token": None, "lease_expires_at": None}
MAX_ERROR_LEN = 4000


def new_job(req: JobRequest, now: datetime) -> Values:
    """Column values of a key's first row."""
    return {
        "id": str(uuid.uuid4()),
        "job_type": req.job_type,
        "resource_id": req.resource_id,
        "project_id": req.project_id,
        "payload": dict(req.payload),
        "status": JobStatus.NEW.value,
        "attempt": 0,
        "failures": 0,
        "rerun": False,
        "last_error": None,
        "run_after": now,
        **_NO_LEASE,
        "created_at": now,
        "updated_at": now,
        "started_at": None,
        "finished_at": None,
        "version": 1,
    }


def on_enqueue(job: Job, req: JobRequest, now: datetime) -> Values:
    """Coalesce: never a second row; the payload is what the next run needs.

    A NEW job keeps its schedule, so a burst of events cannot cut short the
    backoff of a job whose region is down; ``redo`` is the way to run it now.
    """
    # The stored payload still waits for a run (NEW, or the rerun a RUNNING job
    # already owes): the next run serves both events. Otherwise it was served.
    waiting = job.status is JobStatus.NEW or (job.status is JobStatus.RUNNING and job.rerun)
    values: Values = {"payload": merged_payload(job.payload, req.payload) if waiting else dict(req.payload)}
    if req.project_id is not None:
        values["project_id"] = req.project_id
    if job.status is JobStatus.RUNNING:
        values["rerun"] = True  # exactly one follow-up run, however many enqueues
    elif job.status in (JobStatus.SUCCESS, JobStatus.FAIL):
        values.update(_new_cycle(now))
    return values


def merged_payload(waiting: Mapping[str, Any], newer: Mapping[str, Any]) -> dict[str, Any]:
    """One run serves two events: the newer value of each key, except that lists
    join (where to look: the MACs of both events, the quota keys of both writes)
    and a hint holds only when both events gave it (a skip one event allows may
    be work the other needs)."""
    merged = {**waiting, **newer}
    for key, value in newer.items():
        before = waiting.get(key)
        if isinstance(value, list) and isinstance(before, list):
            merged[key] = before + [v for v in value if v not in before]
    if HINTS in waiting or HINTS in newer:
        theirs, ours = waiting.get(HINTS) or {}, newer.get(HINTS) or {}
        merged[HINTS] = {name: True for name in sorted(theirs) if theirs[name] is True and ours.get(name) is True}
    return merged


def is_claimable(job: Job, now: datetime) -> bool:
    if job.status is JobStatus.NEW:
        return job.run_after <= now
    return job.status is JobStatus.RUNNING and _lease_expired(job, now)


def on_claim(
    job: Job, owner: str, now: datetime, lease_seconds: float, policy: RetryPolicy
) -> Values:
    """Take the job (NEW and due, or RUNNING with an expired lease).

    Taking over an expired lease counts as one failure of the lost run, so a
    job that kills its worker every time (a poison job) ends in FAIL instead
    of crashing workers forever. The returned status is FAIL in that case.
    """
    values: Values = {}
    failures = job.failures
    if job.status is JobStatus.RUNNING:
        failures += 1
        error = f"lease of worker {job.lease_owner} expired during attempt {job.attempt}"
        values.update({"failures": failures, "last_error": error})
        if policy.exhausted(failures):
            return {**values, **_terminal(job, now, JobStatus.FAIL, error)}
    return {
        **values,
        "status": JobStatus.RUNNING.value,
        "lease_owner": owner,
        "lease_token": str(uuid.uuid4()),
        "lease_expires_at": now + timedelta(seconds=lease_seconds),
        "attempt": job.attempt + 1,
        "started_at": now,
    }


def on_renew(now: datetime, lease_seconds: float) -> Values:
    return {"lease_expires_at": now + timedelta(seconds=lease_seconds)}


def on_success(job: Job, now: datetime) -> Values:
    return _terminal(job, now, JobStatus.SUCCESS, None)


def on_retry_later(job: Job, now: datetime, delay: float, reason: str) -> Values:
    """Not a failure: wait and try again, with no limit (a region may be down for hours)."""
    return {
        "status": JobStatus.NEW.value,
        "run_after": now + timedelta(seconds=delay),
        "rerun": False,  # the retry will see the newest state anyway
        "last_error": _clip(f"retry later: {reason}"),
        **_NO_LEASE,
    }


def on_error(
    job: Job,
    now: datetime,
    error: str,
    policy: RetryPolicy,
    *,
    permanent: bool = False,
    rand: Callable[[], float] | None = None,
) -> Values:
    failures = job.failures + 1
    if permanent or policy.exhausted(failures):
        return {"failures": failures, **_terminal(job, now, JobStatus.FAIL, error)}
    delay = policy.delay(failures, rand) if rand else policy.delay(failures)
    return {
        "status": JobStatus.NEW.value,
        "failures": failures,
        "run_after": now + timedelta(seconds=delay),
        "rerun": False,
        "last_error": _clip(error),
        **_NO_LEASE,
    }


def on_release(now: datetime) -> Values:
    """Give the job back unfinished (graceful shutdown): due again at once."""
    return {"status": JobStatus.NEW.value, "run_after": now, "rerun": False, **_NO_LEASE}


def on_redo(job: Job, now: datetime) -> Values:
    """Admin re-queue of a FAIL (or waiting NEW) job: a fresh cycle, due now."""
    if job.status in (JobStatus.RUNNING, JobStatus.SUCCESS):
        raise InvalidJobState(job.id, job.status.value, "redo")
    return _new_cycle(now)


def check_deletable(job: Job) -> None:
    # Deleting a running job would let a second runner start while the first
    # one is still working on the key.
    if job.status is JobStatus.RUNNING:
        raise InvalidJobState(job.id, job.status.value, "delete")


def _terminal(job: Job, now: datetime, status: JobStatus, error: str | None) -> Values:
    """End of a cycle. If an enqueue arrived meanwhile, start a fresh cycle instead."""
    values: Values = {"finished_at": now, "rerun": False, "last_error": _clip(error), **_NO_LEASE}
    if job.rerun:
        return {**values, **_new_cycle(now)}
    return {**values, "status": status.value}


def _new_cycle(now: datetime) -> Values:
    return {
        "status": JobStatus.NEW.value,
        "attempt": 0,
        "failures": 0,
        "rerun": False,
        "run_after": now,
    }


def _lease_expired(job: Job, now: datetime) -> bool:
    return job.lease_expires_at is None or job.lease_expires_at < now


def _clip(text: str | None) -> str | None:
    return text if text is None or len(text) <= MAX_ERROR_LEN else text[: MAX_ERROR_LEN - 3] + "..."
