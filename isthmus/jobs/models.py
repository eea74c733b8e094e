"""Job records and request/filter value objects (plain dataclasses)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from isthmus.jobs.errors import InvalidJobRequest

MAX_TYPE_LEN = 64
MAX_RESOURCE_LEN = 255
MAX_PROJECT_LEN = 64
# Payload key of hints, {name: True}: work an event says its run may skip (docs/jobs.md, Coalescing).
HINTS = "hints"


class JobStatus(enum.StrEnum):
    """The four states of the reference (Tricircle) job API, kept for the Admin API.

    A job waiting for a retry is NEW with a future ``run_after``.
    """

    NEW = "NEW"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    FAIL = "FAIL"

    @classmethod
    def parse(cls, value: str | JobStatus) -> JobStatus:
        """Case-insensitive: ``fail`` and ``FAIL`` name the same status (as Tricircle's filters)."""
        try:
            return cls(str(value).upper())
        except ValueError:
            raise InvalidJobRequest(f"status: unknown value {value!r}") from None


@dataclass(frozen=True)
class Job:
    """One row of the jobs table: the reconcile state of one (job_type, resource_id).

    The id is stable for the key's whole life: re-enqueues, reruns and redo
    reuse the row, so ``GET /jobs/{id}`` keeps answering after success (Tricircle
    gave a rerun a new id; stable ids are the deliberate choice, docs/jobs.md).
    """

    id: str
    job_type: str
    resource_id: str
    project_id: str | None
    payload: Mapping[str, Any]
    status: JobStatus
    attempt: int  # runs started in the current cycle (1-based while RUNNING)
    failures: int  # failed runs in the current cycle; RetryLater does not count
    rerun: bool  # enqueued while RUNNING: run once more after this run
    last_error: str | None
    run_after: datetime
    lease_owner: str | None
    lease_token: str | None
    lease_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    version: int  # bumped by every update: the compare-and-set guard

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly view for the Admin API (lease token left out: it is a secret of the holder)."""
        return {
            "id": self.id,
            "type": self.job_type,
            "resource_id": self.resource_id,
            "project_id": self.project_id,
            "payload": dict(self.payload),
            "status": self.status.value,
            "attempt": self.attempt,
            "failures": self.failures,
            "rerun": self.rerun,
            "last_error": self.last_error,
            "run_after": _iso(self.run_after),
            "lease_owner": self.lease_owner,
            "lease_expires_at": _iso(self.lease_expires_at),
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
        }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


@dataclass(frozen=True)
class JobRequest:
    """Ask for (job_type, resource_id) to be reconciled. Validated on creation."""

    job_type: str
    resource_id: str
    project_id: str | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_text("type", self.job_type, MAX_TYPE_LEN)
        _check_text("resource_id", self.resource_id, MAX_RESOURCE_LEN)
        if self.project_id is not None:
            _check_text("project_id", self.project_id, MAX_PROJECT_LEN)
        if not isinstance(self.payload, Mapping):
            raise InvalidJobRequest("payload: must be an object")


@dataclass(frozen=True)
class ResourceRef:
    """One resource a periodic resync wants reconciled (the job type is implied)."""

    resource_id: str
    project_id: str | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobFilter:
    """List filters; None means "any". ``status`` accepts any case."""

    status: JobStatus | str | None = None
    job_type: str | None = None
    project_id: str | None = None
    resource_id: str | None = None

    def __post_init__(self) -> None:
        if self.status is not None:
            object.__setattr__(self, "status", JobStatus.parse(self.status))


def _check_text(name: str, value: object, max_len: int) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidJobRequest(f"{name}: must be a non-empty string")
    if len(value) > max_len:
        raise InvalidJobRequest(f"{name}: longer than {max_len} characters")
