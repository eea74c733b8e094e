"""Durable job engine: coalesced, leased, retried reconcile jobs in the Isthmus DB.

Public surface:
- :class:`JobStore` — enqueue (coalesced per (type, resource)), list/get/delete/redo;
- :class:`HandlerRegistry`, :class:`JobContext`, :class:`RetryLater`,
  :class:`PermanentFailure`, :class:`Resync`, :class:`Stopped` — for handler authors;
- :class:`Batch`, :class:`BatchPolicy` — for batch handlers (one run over many jobs);
- :class:`Worker` / :func:`isthmus.jobs.worker.main` — the ``isthmus-xjob`` loop.

See docs/jobs.md for the state machine and failure handling.
"""

from isthmus.db import make_engine
from isthmus.jobs.backoff import RetryPolicy
from isthmus.jobs.batch import Batch
from isthmus.jobs.clock import Clock, DatabaseClock, ManualClock, SystemClock
from isthmus.jobs.errors import (
    ConcurrentUpdate,
    InvalidJobRequest,
    InvalidJobState,
    JobError,
    JobNotFound,
    LeaseLost,
    PermanentFailure,
    RetryLater,
    Stopped,
    UnknownJobType,
)
from isthmus.jobs.leases import Claim, Leases
from isthmus.jobs.models import Job, JobFilter, JobRequest, JobStatus, ResourceRef
from isthmus.jobs.registry import BatchPolicy, HandlerRegistry, HandlerSpec, JobContext, LeaseWatch, Resync
from isthmus.jobs.runner import Runner
from isthmus.jobs.schema import create_schema, drop_schema
from isthmus.jobs.store import JobStore
from isthmus.jobs.worker import Worker, WorkerSettings

__all__ = [
    "Batch",
    "BatchPolicy",
    "Claim",
    "Clock",
    "ConcurrentUpdate",
    "HandlerRegistry",
    "HandlerSpec",
    "InvalidJobRequest",
    "InvalidJobState",
    "Job",
    "JobContext",
    "JobError",
    "JobFilter",
    "JobNotFound",
    "JobRequest",
    "JobStatus",
    "JobStore",
    "LeaseLost",
    "LeaseWatch",
    "Leases",
    "DatabaseClock",
    "ManualClock",
    "PermanentFailure",
    "ResourceRef",
    "RetryLater",
    "RetryPolicy",
    "Resync",
    "Runner",
    "Stopped",
    "SystemClock",
    "UnknownJobType",
    "Worker",
    "WorkerSettings",
    "create_schema",
    "drop_schema",
    "make_engine",
]
