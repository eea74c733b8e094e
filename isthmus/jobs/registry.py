"""Handler registration. The engine knows no job type by name.

A handler is a level-triggered reconciler: given a key it reads the current
desired state (central Neutron, the Isthmus DB) and makes the target match.
It must be idempotent: it may run twice, or again after a crash halfway.

    registry = HandlerRegistry()

    @registry.handler("port_delete", retry=RetryPolicy(max_attempts=5))
    def delete_port(ctx: JobContext) -> None:
        ...  # raise RetryLater("region down") / PermanentFailure("bad payload")
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from isthmus.jobs.backoff import RetryPolicy
from isthmus.jobs.errors import UnknownJobType
from isthmus.jobs.models import MAX_TYPE_LEN, ResourceRef


@dataclass(frozen=True)
class JobContext:
    """What a handler gets: the key, a copy of the payload, and the attempt number."""

    job_id: str
    job_type: str
    resource_id: str
    project_id: str | None
    payload: Mapping[str, Any]
    attempt: int
    _stop: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def should_stop(self) -> bool:
        """True once the worker shuts down or lost this job's lease.

        A long handler checks it between steps and returns early (raising
        ``RetryLater``); stopping is always safe because handlers are idempotent.
        """
        return self._stop.is_set()


Handler = Callable[[JobContext], None]


@dataclass(frozen=True)
class Resync:
    """Periodic re-enqueue of every resource of a type, for drift repair.

    ``list_resources`` returns what should exist; enqueueing is coalesced, so
    a resync over resources that already have pending jobs adds nothing.
    """

    interval: float
    list_resources: Callable[[], Iterable[ResourceRef]]

    def __post_init__(self) -> None:
        if self.interval <= 0:
            raise ValueError("resync interval must be > 0")


@dataclass(frozen=True)
class HandlerSpec:
    job_type: str
    handler: Handler
    retry: RetryPolicy | None = None  # None: the worker's default policy
    resync: Resync | None = None


class HandlerRegistry:
    def __init__(self) -> None:
        self._specs: dict[str, HandlerSpec] = {}

    def register(
        self,
        job_type: str,
        handler: Handler,
        *,
        retry: RetryPolicy | None = None,
        resync: Resync | None = None,
    ) -> None:
        if not job_type or len(job_type) > MAX_TYPE_LEN:
            raise ValueError(f"job type must be 1..{MAX_TYPE_LEN} characters")
        if job_type in self._specs:
            raise ValueError(f"a handler for job type {job_type!r} is already registered")
        self._specs[job_type] = HandlerSpec(job_type, handler, retry, resync)

    def handler(
        self, job_type: str, *, retry: RetryPolicy | None = None, resync: Resync | None = None
    ) -> Callable[[Handler], Handler]:
        """Decorator form of :meth:`register`."""

        def decorate(func: Handler) -> Handler:
            self.register(job_type, func, retry=retry, resync=resync)
            return func

        return decorate

    def get(self, job_type: str) -> HandlerSpec:
        try:
            return self._specs[job_type]
        except KeyError:
            raise UnknownJobType(job_type) from None

    def job_types(self) -> tuple[str, ...]:
        return tuple(sorted(self._specs))

    def resyncs(self) -> list[HandlerSpec]:
        return [spec for spec in self._specs.values() if spec.resync is not None]

    def policies(self, default: RetryPolicy) -> dict[str, RetryPolicy]:
        return {t: spec.retry or default for t, spec in self._specs.items()}

    def __contains__(self, job_type: object) -> bool:
        return job_type in self._specs

    def __len__(self) -> int:
        return len(self._specs)
