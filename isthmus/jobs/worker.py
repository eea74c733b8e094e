"""The worker loop and the ``isthmus-xjob`` entry point.

One dispatcher thread (the caller of :meth:`Worker.run`) claims due jobs, runs
each in its own daemon thread (at most ``concurrency`` at once), renews the
leases of running jobs, and on stop waits ``shutdown_grace`` seconds before
releasing what is still running. Handler threads are daemons so that a handler
stuck in I/O cannot keep the process alive after its job was released.

A batch of a batch type's jobs is one run: one thread, one of the
``concurrency`` slots, one lease per job (batch.py).
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from oslo_config import cfg

from isthmus.db import make_engine
from isthmus.db.migration import SchemaOutdated, require_current
from isthmus.jobs import config
from isthmus.jobs.backoff import RetryPolicy
from isthmus.jobs.leases import Claim, Leases
from isthmus.jobs.loader import ENTRY_POINT_GROUP, load_handlers
from isthmus.jobs.periodic import ResyncScheduler
from isthmus.jobs.registry import DEFAULT_RUN_DEADLINE, HandlerRegistry, LeaseWatch
from isthmus.jobs.runner import Runner
from isthmus.jobs.store import JobStore

LOG = logging.getLogger(__name__)


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class WorkerSettings:
    concurrency: int = 4
    lease_seconds: float = 60.0
    poll_interval: float = 1.0
    shutdown_grace: float = 30.0
    resync: bool = True
    owner: str = field(default_factory=default_owner)
    run_deadline: float = DEFAULT_RUN_DEADLINE  # of job types that declare none
    takeover_grace: float = 0.0  # past a lease's expiry before another worker takes the job

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if self.takeover_grace < 0:
            raise ValueError("takeover_grace must be >= 0")
        if self.run_deadline <= 0:
            raise ValueError("run_deadline must be > 0")

    @property
    def renew_every(self) -> float:
        # Three renewals per lease: one slow DB round trip does not lose it.
        return self.lease_seconds / 3


@dataclass
class _Item:
    """One claimed job of a run."""

    claim: Claim
    lease: LeaseWatch  # shared with the job's context: renewals move it on


@dataclass
class _Running:
    """One handler run in one slot: a plain job, or a batch of one type's jobs."""

    key: int  # unique per run: a job may be in a later run while this one lingers (abandoned)
    items: tuple[_Item, ...]
    batch: bool
    stop: threading.Event
    abandon_at: datetime  # still running then: the handler ignored its deadline
    thread: threading.Thread | None = None

    @property
    def lease(self) -> LeaseWatch:
        """The lease of a plain run (a batch has one per item)."""
        [item] = self.items
        return item.lease

    @property
    def job_type(self) -> str:
        return self.items[0].claim.job.job_type

    def all_lost(self) -> bool:
        return all(item.lease.lost for item in self.items)


class Worker:
    def __init__(
        self,
        store: JobStore,
        registry: HandlerRegistry,
        settings: WorkerSettings | None = None,
        policy: RetryPolicy | None = None,
        rand: Callable[[], float] | None = None,
    ) -> None:
        self.settings = settings or WorkerSettings()
        self.leases = Leases(store.engine, store.clock, self.settings.owner, self.settings.lease_seconds,
                             self.settings.takeover_grace)
        self.runner = Runner(
            self.leases, registry, policy or RetryPolicy(), rand, default_deadline=self.settings.run_deadline
        )
        self.scheduler = ResyncScheduler(store, registry, self.settings.owner)
        self._stopping = threading.Event()
        self._force = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._running: dict[int, _Running] = {}
        self._keys = itertools.count()
        self._batch_turn = 0  # which batch type claims first in the next dispatch pass

    # -- control ---------------------------------------------------------------

    def request_stop(self, *, force: bool = False) -> None:
        """Stop claiming; running jobs get ``shutdown_grace`` (none if ``force``)."""
        self._stopping.set()
        if force:
            self._force.set()
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    @property
    def running_jobs(self) -> list[str]:
        """Ids of the jobs running here, those of every batch included."""
        with self._lock:
            return [item.claim.job.id for entry in self._running.values() for item in entry.items]

    def _slots_taken(self) -> int:
        with self._lock:
            return len(self._running)

    # -- the loop ----------------------------------------------------------------

    def run(self) -> None:
        LOG.info("worker %s started: types=%s", self.settings.owner, ",".join(self.runner.registry.job_types()))
        resync = self._start_resync_thread()
        next_renew = time.monotonic() + self.settings.renew_every
        try:
            while not self._stopping.is_set():
                if time.monotonic() >= next_renew:
                    self._renew_all()
                    next_renew = time.monotonic() + self.settings.renew_every
                wake_in = self._dispatch()
                self._wake.wait(min(self.settings.poll_interval, self.settings.renew_every,
                                    wake_in if wake_in is not None else float("inf")))
                self._wake.clear()
        finally:
            self._shutdown()
            if resync is not None:
                resync.join(timeout=1.0)
        LOG.info("worker %s stopped", self.settings.owner)

    def _dispatch(self) -> float | None:
        """Fill the free slots: one batch per batch type first, then plain jobs.

        Returns the seconds until the loop must look again although no poll is
        due: a batch type's jobs leave their window then (or at once, when a
        full batch may have left more behind); None if nothing waits so."""
        free = self.settings.concurrency - self._slots_taken()
        if free <= 0:
            return None  # a run that ends wakes the loop
        wake_in: float | None = None
        for job_type in self._batch_order():
            if free <= 0:
                break
            started, again_in = self._dispatch_batch(job_type)
            free -= started
            if again_in is not None:
                wake_in = again_in if wake_in is None else min(wake_in, again_in)
        if free <= 0:
            return wake_in
        try:
            claims = self.runner.claim(free)
        except Exception:  # noqa: BLE001 - a DB outage must not kill the loop
            LOG.exception("claiming jobs failed; will retry")
            return wake_in
        for claim in claims:
            self._start(claim)
        return wake_in

    def _batch_order(self) -> list[str]:
        """The batch types, starting one further each pass: when slots are scarce,
        no type waits behind the same other types every time."""
        types = list(self.runner.registry.batch_types())
        if not types:
            return []
        first = self._batch_turn % len(types)
        self._batch_turn += 1
        return types[first:] + types[:first]

    def _dispatch_batch(self, job_type: str) -> tuple[int, float | None]:
        """Start the type's next batch if its window has passed: (slots taken, seconds
        until the type should be looked at again, None: at the next poll)."""
        try:
            claims = self.runner.claim_batch(job_type)
            if claims:
                self._start_batch(claims)
                full = len(claims) >= self.runner.batch_policy(job_type).max_size
                return 1, 0.0 if full else None
            return 0, self._window_left(job_type)
        except Exception:  # noqa: BLE001 - a DB outage must not kill the loop
            LOG.exception("claiming a batch of %s failed; will retry", job_type)
            return 0, None

    def _window_left(self, job_type: str) -> float | None:
        """Seconds until the type's oldest due job is past its window; None if none
        is waiting (or it is past already and went to another worker meanwhile)."""
        ripe_at = self.leases.batch_ripe_at(job_type, self.runner.batch_policy(job_type).window)
        if ripe_at is None:
            return None
        left = (ripe_at - self.leases.clock.now()).total_seconds()
        return left if left > 0 else None

    def _start(self, claim: Claim) -> None:
        self._launch((claim,), batch=self.runner.registry.get(claim.job.job_type).batch is not None)

    def _start_batch(self, claims: Sequence[Claim]) -> None:
        self._launch(tuple(claims), batch=True)

    def _launch(self, claims: tuple[Claim, ...], *, batch: bool) -> None:
        job_type = claims[0].job.job_type
        # One lease length past the deadline: time for a call in flight to time
        # out and the handler to return after its next region call raised.
        grace = self.runner.deadline_of(job_type) + self.settings.lease_seconds
        abandon_at = self.leases.clock.now() + timedelta(seconds=grace)
        items = tuple(_Item(claim, LeaseWatch(claim.job.lease_expires_at)) for claim in claims)
        entry = _Running(next(self._keys), items, batch, threading.Event(), abandon_at)
        entry.thread = threading.Thread(
            target=self._execute, args=(entry,), name=f"{'batch' if batch else 'job'}-{job_type}", daemon=True
        )
        with self._lock:
            self._running[entry.key] = entry
        entry.thread.start()

    def _execute(self, entry: _Running) -> None:
        try:
            if entry.batch:
                self.runner.run_batch([item.claim for item in entry.items], entry.stop,
                                      [item.lease for item in entry.items])
            else:
                self.runner.run(entry.items[0].claim, entry.stop, entry.lease)
        except Exception:  # noqa: BLE001 - e.g. DB down while storing the outcome
            LOG.exception("jobs %s: storing the outcome failed; the lease will expire", _ids(entry))
        finally:
            with self._lock:
                if self._running.get(entry.key) is entry:
                    del self._running[entry.key]
            self._wake.set()  # a slot is free: claim again without waiting a poll

    def _renew_all(self) -> None:
        with self._lock:
            entries = list(self._running.values())
        for entry in entries:
            if self.leases.clock.now() >= entry.abandon_at:
                self._abandon(entry)
                continue
            for item in entry.items:
                if not item.lease.lost:
                    self._renew(entry, item)
            if entry.all_lost():
                entry.stop.set()  # nothing of this run can be stored any more

    def _renew(self, entry: _Running, item: _Item) -> None:
        job_id = item.claim.job.id
        try:
            # Taken before the renewal, so the handler's view never outlasts the row's.
            renewed_until = self.leases.clock.now() + timedelta(seconds=self.settings.lease_seconds)
            if self.leases.renew(item.claim):
                item.lease.expires_at = renewed_until
            elif self._still_running(entry):  # not merely finished since the list was taken
                LOG.warning("job %s: lease lost, %s", job_id,
                            "its outcome is dropped from the batch" if entry.batch else "asking its handler to stop")
                item.lease.lost = True
        except Exception:  # noqa: BLE001 - keep trying; the lease may still be valid
            LOG.exception("renewing lease of job %s failed", job_id)

    def _still_running(self, entry: _Running) -> bool:
        with self._lock:
            return self._running.get(entry.key) is entry

    def _abandon(self, entry: _Running) -> None:
        """Free the slot and the jobs of a handler that ignored its deadline.

        Its thread cannot be killed: it runs on as a daemon, every region call
        it makes raises, and its outcomes are dropped (the leases are gone)."""
        held = [item for item in entry.items if not item.lease.lost]
        for item in entry.items:
            item.lease.lost = True
        entry.stop.set()
        with self._lock:
            if self._running.get(entry.key) is entry:
                del self._running[entry.key]
        LOG.error("jobs %s (%s): still running long past the deadline; abandoned", _ids(entry), entry.job_type)
        for item in held:
            try:
                self.runner.abandon(item.claim, "run deadline passed and the handler did not stop")
            except Exception:  # noqa: BLE001 - the lease will expire instead (also a failure)
                LOG.exception("job %s: recording the abandoned run failed", item.claim.job.id)
        self._wake.set()

    # -- periodic resync ---------------------------------------------------------

    def _start_resync_thread(self) -> threading.Thread | None:
        specs = self.runner.registry.resyncs()
        if not self.settings.resync or not specs:
            return None
        shortest = min(spec.resync.interval for spec in specs if spec.resync)
        period = max(self.settings.poll_interval, min(shortest / 2, 30.0))
        thread = threading.Thread(target=self._resync_loop, args=(period,), name="job-resync", daemon=True)
        thread.start()
        return thread

    def _resync_loop(self, period: float) -> None:
        while not self._stopping.is_set():
            try:
                if self.scheduler.tick():
                    self._wake.set()
            except Exception:  # noqa: BLE001 - logged; the next period retries
                LOG.exception("periodic resync failed")
            self._stopping.wait(period)

    # -- shutdown ----------------------------------------------------------------

    def _shutdown(self) -> None:
        """Let running jobs finish within the grace period, then release the rest."""
        with self._lock:
            for entry in self._running.values():
                entry.stop.set()  # cooperative handlers see should_stop()
        deadline = time.monotonic() + self.settings.shutdown_grace
        next_renew = time.monotonic() + self.settings.renew_every
        while self.running_jobs and time.monotonic() < deadline and not self._force.is_set():
            if time.monotonic() >= next_renew:  # keep the leases while we wait
                self._renew_all()
                next_renew = time.monotonic() + self.settings.renew_every
            self._wake.wait(0.05)
            self._wake.clear()
        self._release_all()

    def _release_all(self) -> None:
        with self._lock:
            entries = list(self._running.values())
        for item in (item for entry in entries for item in entry.items):
            item.lease.lost = True  # given back: the handler's next region call raises
            try:
                if self.leases.release(item.claim):
                    LOG.warning("job %s released unfinished at shutdown", item.claim.job.id)
            except Exception:  # noqa: BLE001 - the lease will expire instead
                LOG.exception("releasing job %s failed", item.claim.job.id)


def _ids(entry: _Running) -> str:
    return ",".join(item.claim.job.id for item in entry.items)


def install_signal_handlers(worker: Worker) -> None:
    """SIGTERM/SIGINT: graceful stop; a second one: release running jobs at once."""

    def handle(signum: int, _frame: object) -> None:
        force = worker.stopping
        LOG.info("signal %d: %s stop", signum, "forced" if force else "graceful")
        worker.request_stop(force=force)

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)


def settings_from_conf(conf: cfg.ConfigOpts) -> WorkerSettings:
    return WorkerSettings(
        concurrency=conf.jobs.workers,
        lease_seconds=conf.jobs.lease_seconds,
        poll_interval=conf.jobs.poll_interval,
        shutdown_grace=conf.jobs.shutdown_grace,
        resync=conf.jobs.resync_enabled,
        owner=conf.jobs.worker_name or default_owner(),
        run_deadline=conf.jobs.run_deadline,
        takeover_grace=conf.jobs.takeover_grace,
    )


def load_conf(argv: Sequence[str] | None = None) -> cfg.ConfigOpts:
    """Parse ``--config-file`` etc. into a private ConfigOpts (no global state)."""
    conf = cfg.ConfigOpts()
    config.register_opts(conf)
    conf.register_cli_opts(config.cli_opts)
    conf(list(sys.argv[1:] if argv is None else argv), project="isthmus", prog="isthmus-xjob")
    return conf


def build_worker(conf: cfg.ConfigOpts) -> Worker:
    engine = make_engine(conf.database.connection, busy_timeout=conf.jobs.sqlite_busy_timeout)
    require_current(engine, "isthmus-xjob")
    registry = load_handlers(
        HandlerRegistry(), conf.jobs.handler_modules, use_entry_points=conf.jobs.load_entry_points, conf=conf
    )
    return Worker(JobStore(engine), registry, settings_from_conf(conf), config.retry_policy(conf))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``isthmus-xjob`` console script."""
    conf = load_conf(argv)
    logging.basicConfig(
        level=logging.DEBUG if conf.debug else logging.INFO,
        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s",
    )
    try:
        worker = build_worker(conf)
    except SchemaOutdated as exc:
        LOG.error("%s", exc)
        return 2
    if not worker.runner.registry.job_types():
        LOG.error("no job handlers: none from entry points %s nor [jobs] handler_modules", ENTRY_POINT_GROUP)
        return 2
    if conf.metrics.port:
        from isthmus.jobs import metrics

        try:
            metrics.serve(worker.leases.engine, conf.metrics.port, conf.metrics.bind_host)
            LOG.info("metrics on http://%s:%s/metrics", conf.metrics.bind_host, conf.metrics.port)
        except OSError as exc:  # a busy port costs the metrics, never the jobs
            LOG.error("no metrics: cannot listen on %s:%s: %s", conf.metrics.bind_host, conf.metrics.port, exc)
    install_signal_handlers(worker)
    worker.run()
    worker.leases.engine.dispose()
    return 0
