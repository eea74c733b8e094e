"""Handler registration. The engine knows no job type by name.

A handler is a level-triggered reconciler: given a key it reads the current
desired state (central Neutron, the Isthmus DB) and makes the target match.
It must be idempotent: it may run twice, or again after a crash halfway.

    registry = HandlerRegistry()

    @registry.handler("port_delete", retry=RetryPolicy(max_attempts=5))
    def delete_port(ctx: JobContext) -> None:
        ...  # raise RetryLater("region down") / PermanentFailure("bad payload")

A type may declare the named parts of its key (``resource_keys``, default
``("resource_id",)``): the Admin API publishes them as the type's schema, checks
posted jobs against them, and joins the values with ``#`` into ``resource_id``
(``HandlerSpec.join_resource`` / ``split_resource``). The engine itself only
ever sees the joined ``resource_id``.

A type may declare a run ``deadline`` in seconds (default: the worker's
``[jobs] run_deadline``). Past it, or once the lease is lost, ``should_stop()``
is true and the next region call raises :class:`Stopped`.

A *batch* type (``register_batch`` / ``@registry.batch_handler``) is run over
many due jobs at once: its handler takes one :class:`~isthmus.jobs.batch.Batch`
instead of one context (see batch.py).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from isthmus.jobs.backoff import RetryPolicy
from isthmus.jobs.clock import Clock, SystemClock
from isthmus.jobs.errors import InvalidJobRequest, Stopped, UnknownJobType
from isthmus.jobs.models import HINTS, MAX_TYPE_LEN, ResourceRef

if TYPE_CHECKING:
    from isthmus.jobs.batch import Batch

DEFAULT_RUN_DEADLINE = 300.0


def seconds_left(deadline: datetime | None, clock: Clock) -> float | None:
    """Seconds before a run's ``deadline`` (negative once past); None without one."""
    return None if deadline is None else (deadline - clock.now()).total_seconds()


@dataclass
class LeaseWatch:
    """What the worker knows of a running job's lease, shared with its handler:
    when it expires (moved on by each renewal) and whether it was taken over."""

    expires_at: datetime | None = None  # None: not tracked
    lost: bool = False


@dataclass(frozen=True)
class JobContext:
    """What a handler gets: the key, a copy of the payload, the attempt number,
    and the run's deadline."""

    job_id: str
    job_type: str
    resource_id: str
    project_id: str | None
    payload: Mapping[str, Any]
    attempt: int
    _stop: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    deadline: datetime | None = None  # None: no deadline (a context built outside the runner)
    _clock: Clock = field(default_factory=SystemClock, repr=False, compare=False)
    _lease: LeaseWatch = field(default_factory=LeaseWatch, repr=False, compare=False)

    def hinted(self, name: str) -> bool:
        """Whether every event this run serves said it may skip ``name``'s work
        (``payload["hints"]``; coalescing keeps a hint only when all events gave it)."""
        hints = self.payload.get(HINTS)
        return isinstance(hints, Mapping) and hints.get(name) is True

    def remaining(self) -> float | None:
        """Seconds left before the deadline (negative once past); None without one."""
        return seconds_left(self.deadline, self._clock)

    def deadline_exceeded(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0

    def lease_lost(self) -> bool:
        """True once another worker took the job over: nothing of this run may be stored."""
        return self._lease.lost

    def lease_held(self) -> bool:
        """False once the lease was lost or expired unrenewed: work on this job must stop
        (a batch handler skips the job and goes on with the others)."""
        return self._lease_problem() is None

    def stop_reason(self) -> str | None:
        """Why the run must end now, or None."""
        return self._must_stop() or ("worker stopping" if self._stop.is_set() else None)

    def _must_stop(self) -> str | None:
        problem = self._lease_problem()
        if problem is not None:
            return problem
        if self.deadline_exceeded():
            return "run deadline passed"
        return None

    def _lease_problem(self) -> str | None:
        if self._lease.lost:
            return "lease lost to another worker"
        if self._lease.expires_at is not None and self._clock.now() >= self._lease.expires_at:
            return "lease expired (not renewed in time)"
        return None

    def should_stop(self) -> bool:
        """True once the worker shuts down, the lease is lost or expired, or the
        deadline passed.

        A long handler checks it between steps and returns early (raising
        ``RetryLater``) or calls :meth:`check`; stopping is always safe because
        handlers are idempotent.
        """
        return self.stop_reason() is not None

    def check(self, *, shutdown: bool = True) -> None:
        """Raise :class:`Stopped` if the run must end (never counted as a failure).

        The runner's call guard passes ``shutdown=False``: region calls stop a
        run whose lease or deadline is gone, while a stopping worker lets them
        go on for its ``shutdown_grace``."""
        reason = self._must_stop()
        if reason is not None:
            raise Stopped(reason)  # again after the type's backoff
        if shutdown and self._stop.is_set():
            raise Stopped("worker stopping", delay=0.0)  # due again at once, on another worker


Handler = Callable[[JobContext], object]  # the return value is ignored
BatchHandler = Callable[["Batch"], object]  # likewise


@dataclass(frozen=True)
class BatchPolicy:
    """How a batch type's due jobs are gathered into one run.

    ``window``: seconds the oldest due job waits before its batch is claimed, so
    a burst of events (tens of milliseconds apart) becomes one run; 0 claims at
    once whatever is due. ``max_size``: jobs per run at most; the rest, already
    past the window, make the next batch.
    """

    max_size: int
    window: float

    def __post_init__(self) -> None:
        if isinstance(self.max_size, bool) or not isinstance(self.max_size, int) or self.max_size < 1:
            raise ValueError("batch max_size must be an integer >= 1")
        if not math.isfinite(self.window) or self.window < 0:
            raise ValueError("batch window must be >= 0 seconds")


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


RESOURCE_SEPARATOR = "#"
DEFAULT_RESOURCE_KEYS = ("resource_id",)
_KEY = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@dataclass(frozen=True)
class HandlerSpec:
    job_type: str
    handler: Handler | BatchHandler  # a BatchHandler exactly when ``batch`` is set
    retry: RetryPolicy | None = None  # None: the worker's default policy
    resync: Resync | None = None
    resource_keys: tuple[str, ...] = DEFAULT_RESOURCE_KEYS
    deadline: float | None = None  # seconds a run may take; None: the worker's [jobs] run_deadline
    batch: BatchPolicy | None = None  # None: one job per run

    def __post_init__(self) -> None:
        if self.deadline is not None and self.deadline <= 0:
            raise ValueError(f"deadline of {self.job_type!r} must be > 0")

    def join_resource(self, resource: Mapping[str, Any]) -> str:
        """``{"pod_id": P, "network_id": N}`` -> ``"P#N"`` (in declared key order).

        Keys must match the declaration exactly; values are non-empty strings
        without the separator. Errors name the keys at fault."""
        if not isinstance(resource, Mapping):
            raise InvalidJobRequest("resource: must be an object")
        missing = [k for k in self.resource_keys if k not in resource]
        extra = sorted(str(k) for k in resource if k not in self.resource_keys)
        if missing or extra:
            parts = ([f"missing key(s) {', '.join(missing)}"] if missing else []) + (
                [f"unexpected key(s) {', '.join(extra)}"] if extra else [])
            raise InvalidJobRequest(
                f"resource: {'; '.join(parts)} (type {self.job_type} takes {', '.join(self.resource_keys)})")
        for key in self.resource_keys:
            value = resource[key]
            if not isinstance(value, str) or not value.strip():
                raise InvalidJobRequest(f"resource.{key}: must be a non-empty string")
            if RESOURCE_SEPARATOR in value:
                raise InvalidJobRequest(f"resource.{key}: must not contain {RESOURCE_SEPARATOR!r}")
        return RESOURCE_SEPARATOR.join(resource[k].strip() for k in self.resource_keys)

    def split_resource(self, resource_id: str) -> dict[str, str]:
        """The inverse of :meth:`join_resource`; a resource id of another shape
        (not written through it) comes back as ``{"resource_id": resource_id}``."""
        parts = resource_id.split(RESOURCE_SEPARATOR, len(self.resource_keys) - 1)
        if len(parts) != len(self.resource_keys):
            return {"resource_id": resource_id}
        return dict(zip(self.resource_keys, parts, strict=True))


class HandlerOptions(TypedDict, total=False):
    """What :meth:`HandlerRegistry.register` and ``register_batch`` take for every
    job type; their defaults are those of ``HandlerRegistry._add``."""

    retry: RetryPolicy | None
    resync: Resync | None
    resource_keys: Sequence[str]
    deadline: float | None


class HandlerRegistry:
    def __init__(self) -> None:
        self._specs: dict[str, HandlerSpec] = {}

    def register(self, job_type: str, handler: Handler, **options: Unpack[HandlerOptions]) -> None:
        self._add(job_type, handler, None, **options)

    def handler(self, job_type: str, **options: Unpack[HandlerOptions]) -> Callable[[Handler], Handler]:
        """Decorator form of :meth:`register`."""

        def decorate(func: Handler) -> Handler:
            self.register(job_type, func, **options)
            return func

        return decorate

    def register_batch(
        self, job_type: str, handler: BatchHandler, *, max_size: int = 100, window: float = 0.05,
        **options: Unpack[HandlerOptions],
    ) -> None:
        """Register a handler that runs over up to ``max_size`` due jobs of the type at
        once (one :class:`~isthmus.jobs.batch.Batch`), claimed once the oldest has been
        due ``window`` seconds; everything else is as for :meth:`register`, per job."""
        self._add(job_type, handler, BatchPolicy(max_size, window), **options)

    def batch_handler(
        self, job_type: str, *, max_size: int = 100, window: float = 0.05, **options: Unpack[HandlerOptions],
    ) -> Callable[[BatchHandler], BatchHandler]:
        """Decorator form of :meth:`register_batch`."""

        def decorate(func: BatchHandler) -> BatchHandler:
            self.register_batch(job_type, func, max_size=max_size, window=window, **options)
            return func

        return decorate

    def _add(
        self,
        job_type: str,
        handler: Handler | BatchHandler,
        batch: BatchPolicy | None,
        *,
        retry: RetryPolicy | None = None,
        resync: Resync | None = None,
        resource_keys: Sequence[str] = DEFAULT_RESOURCE_KEYS,
        deadline: float | None = None,
    ) -> None:
        if not job_type or len(job_type) > MAX_TYPE_LEN:
            raise ValueError(f"job type must be 1..{MAX_TYPE_LEN} characters")
        if job_type in self._specs:
            raise ValueError(f"a handler for job type {job_type!r} is already registered")
        keys = tuple(resource_keys)
        if not keys or len(set(keys)) != len(keys) or not all(_KEY.match(k) for k in keys):
            raise ValueError(f"resource_keys of {job_type!r}: distinct lower-case identifiers, at least one")
        self._specs[job_type] = HandlerSpec(job_type, handler, retry, resync, keys, deadline, batch)

    def get(self, job_type: str) -> HandlerSpec:
        try:
            return self._specs[job_type]
        except KeyError:
            raise UnknownJobType(job_type) from None

    def job_types(self) -> tuple[str, ...]:
        return tuple(sorted(self._specs))

    def schemas(self) -> dict[str, tuple[str, ...]]:
        """Job type -> its resource keys, sorted by type (``GET /v1.0/jobs/schemas``)."""
        return {t: self._specs[t].resource_keys for t in sorted(self._specs)}

    def resyncs(self) -> list[HandlerSpec]:
        return [spec for spec in self._specs.values() if spec.resync is not None]

    def policies(self, default: RetryPolicy) -> dict[str, RetryPolicy]:
        return {t: spec.retry or default for t, spec in self._specs.items()}

    def plain_policies(self, default: RetryPolicy) -> dict[str, RetryPolicy]:
        """Retry policies of the types run one job at a time (claimed together)."""
        return {t: spec.retry or default for t, spec in self._specs.items() if spec.batch is None}

    def batch_types(self) -> tuple[str, ...]:
        """The types run as batches, sorted; each is claimed on its own (leases.claim_batch)."""
        return tuple(sorted(t for t, spec in self._specs.items() if spec.batch is not None))

    def __contains__(self, job_type: object) -> bool:
        return job_type in self._specs

    def __len__(self) -> int:
        return len(self._specs)
