"""Periodic resync: re-enqueue every resource of a type on a timer (drift repair).

Several workers may run the scheduler; the ``isthmus_job_schedules`` row makes
exactly one of them do each tick (compare-and-set on ``next_run_at``). Even if
two did, enqueueing is coalesced, so the cost would be a wasted listing only.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from isthmus.db import retry_transient, write_tx
from isthmus.jobs.clock import Clock
from isthmus.jobs.registry import HandlerRegistry, HandlerSpec
from isthmus.jobs.schema import schedules, to_db
from isthmus.jobs.store import JobStore

LOG = logging.getLogger(__name__)


class ResyncScheduler:
    def __init__(self, store: JobStore, registry: HandlerRegistry, owner: str) -> None:
        self.store = store
        self.registry = registry
        self.owner = owner

    @property
    def engine(self) -> Engine:
        return self.store.engine

    @property
    def clock(self) -> Clock:
        return self.store.clock

    def tick(self) -> int:
        """Run every due resync this worker wins; returns how many jobs were enqueued."""
        enqueued = 0
        for spec in self.registry.resyncs():
            if self._take_turn(spec):
                enqueued += self._resync(spec)
        return enqueued

    def _take_turn(self, spec: HandlerSpec) -> bool:
        resync = spec.resync
        assert resync is not None
        return retry_transient(lambda: self._take_turn_once(spec.job_type, resync.interval))

    def _take_turn_once(self, name: str, interval: float) -> bool:
        now = self.clock.now()
        nxt = to_db(now + timedelta(seconds=interval))
        with write_tx(self.engine) as conn:
            # Due, or scheduled further out than one interval: the interval was
            # shortened (a restart with new configuration applies it at once).
            due = sa.or_(schedules.c.next_run_at <= to_db(now), schedules.c.next_run_at > nxt)
            stmt = (
                sa.update(schedules)
                .where(schedules.c.name == name, due)
                .values(next_run_at=nxt, last_owner=self.owner)
            )
            if conn.execute(stmt).rowcount == 1:
                return True
            if conn.execute(sa.select(schedules.c.name).where(schedules.c.name == name)).first():
                return False  # not due yet, or another worker took this tick
        # First tick ever for this type: due at once (a startup resync repairs
        # drift that happened while no worker ran).
        return self._insert_first(name, nxt)

    def _insert_first(self, name: str, nxt: datetime | None) -> bool:
        try:
            with write_tx(self.engine) as conn:
                conn.execute(sa.insert(schedules).values(name=name, next_run_at=nxt, last_owner=self.owner))
            return True
        except sa.exc.IntegrityError:
            return False  # another worker inserted it: its tick

    def _resync(self, spec: HandlerSpec) -> int:
        assert spec.resync is not None
        count = 0
        try:
            for ref in spec.resync.list_resources():
                self.store.enqueue(
                    spec.job_type, ref.resource_id, project_id=ref.project_id, payload=ref.payload
                )
                count += 1
        except Exception:  # noqa: BLE001 - a failing lister must not stop the worker
            LOG.exception("resync of %s failed after %d resources", spec.job_type, count)
        LOG.info("resync of %s enqueued %d resources", spec.job_type, count)
        return count
