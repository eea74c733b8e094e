"""The job repository: enqueue (coalesced), list/show/delete/redo, purge.

This is the surface a future Admin API (``/v1.0/jobs``) and the networking
plugins use; workers use :mod:`isthmus.jobs.leases` instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from isthmus.db import read_tx, retry_transient, write_tx
from isthmus.jobs import rows, transitions
from isthmus.jobs.clock import Clock, DatabaseClock
from isthmus.jobs.errors import ConcurrentUpdate, InvalidJobRequest, JobNotFound
from isthmus.jobs.models import Job, JobFilter, JobRequest, JobStatus
from isthmus.jobs.schema import jobs, row_to_job, to_db, values_to_db

MAX_PAGE = 1000
WAITING_CHUNK = 500  # ids per IN (...): under every dialect's bound-parameter limit


class JobStore:
    def __init__(self, engine: Engine, clock: Clock | None = None) -> None:
        self.engine = engine
        self.clock = clock or DatabaseClock(engine)  # one clock for every host (clock.py)

    # -- create ---------------------------------------------------------------

    def enqueue(
        self,
        job_type: str,
        resource_id: str,
        *,
        project_id: str | None = None,
        payload: Mapping[str, Any] | None = None,
    ) -> Job:
        """Ask for the key to be reconciled; at most one pending job per key."""
        return self.submit(JobRequest(job_type, resource_id, project_id, dict(payload or {})))

    def submit(self, req: JobRequest) -> Job:
        for _ in range(rows.MAX_CAS_ROUNDS):
            job = retry_transient(lambda: self._submit_once(req))
            if job is not None:
                return job
        raise ConcurrentUpdate(f"job {req.job_type}/{req.resource_id}: too many concurrent updates")

    def _submit_once(self, req: JobRequest) -> Job | None:
        try:
            with write_tx(self.engine) as conn:
                now = self.clock.now()
                job = rows.fetch_key(conn, req.job_type, req.resource_id)
                if job is None:
                    values = transitions.new_job(req, now)
                    conn.execute(sa.insert(jobs).values(**values_to_db(values)))
                    return rows.fetch(conn, values["id"])
                if not rows.cas(conn, job, transitions.on_enqueue(job, req, now), now):
                    return None
                return rows.fetch(conn, job.id)
        except sa.exc.IntegrityError:
            return None  # another writer inserted the key first: coalesce into its row

    # -- read -----------------------------------------------------------------

    def get(self, job_id: str) -> Job:
        with read_tx(self.engine) as conn:
            job = rows.fetch(conn, job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    def find(self, job_type: str, resource_id: str) -> Job | None:
        with read_tx(self.engine) as conn:
            return rows.fetch_key(conn, job_type, resource_id)

    def list(
        self, filters: JobFilter | None = None, *, limit: int = 100, marker: str | None = None
    ) -> list[Job]:
        """Newest first (created_at, id descending); ``marker`` is the last id of the previous page."""
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidJobRequest(f"limit: must be between 1 and {MAX_PAGE}")
        with read_tx(self.engine) as conn:
            query = sa.select(jobs).where(*_filter_clauses(filters or JobFilter()))
            if marker is not None:
                query = query.where(_after_marker(conn, marker))
            query = query.order_by(jobs.c.created_at.desc(), jobs.c.id.desc()).limit(limit)
            return [row_to_job(r) for r in conn.execute(query).mappings()]

    def waiting(self, job_type: str, resource_ids: Iterable[str], *, or_running: bool = False,
                finished_since: datetime | None = None) -> set[str]:
        """Those of ``resource_ids`` whose ``job_type`` run is still to start: NEW
        (due or backing off), or RUNNING with a follow-up run asked for; with
        ``or_running``, any RUNNING too; with ``finished_since`` (this store's
        clock), those whose run ended since. A broader pass leaves such keys to
        their own run, which read everything afresh."""
        ids = sorted(set(resource_ids))
        running = jobs.c.status == JobStatus.RUNNING.value
        conditions = [jobs.c.status == JobStatus.NEW.value,
                      running if or_running else sa.and_(running, jobs.c.rerun.is_(True))]
        if finished_since is not None:
            conditions.append(jobs.c.finished_at >= to_db(finished_since))
        unstarted = sa.or_(*conditions)
        found: set[str] = set()
        with read_tx(self.engine) as conn:
            for start in range(0, len(ids), WAITING_CHUNK):
                query = sa.select(jobs.c.resource_id).where(
                    jobs.c.job_type == job_type, jobs.c.resource_id.in_(ids[start:start + WAITING_CHUNK]), unstarted)
                found.update(conn.execute(query).scalars())
        return found

    def counts(self, filters: JobFilter | None = None) -> dict[JobStatus, int]:
        """Jobs per status, e.g. to wait until none is NEW, RUNNING or FAIL."""
        query = (
            sa.select(jobs.c.status, sa.func.count())
            .where(*_filter_clauses(filters or JobFilter()))
            .group_by(jobs.c.status)
        )
        with read_tx(self.engine) as conn:
            found = {JobStatus(s): n for s, n in conn.execute(query)}
        return {status: found.get(status, 0) for status in JobStatus}

    # -- admin operations -------------------------------------------------------

    def redo(self, job_id: str) -> Job:
        """Re-queue a FAIL (or waiting NEW) job now; RUNNING/SUCCESS are refused."""
        return rows.mutate(self.engine, self.clock, job_id, transitions.on_redo)

    def delete(self, job_id: str) -> None:
        """Delete a job that is not RUNNING."""
        for _ in range(rows.MAX_CAS_ROUNDS):
            if retry_transient(lambda: self._delete_once(job_id)):
                return
        raise ConcurrentUpdate(f"job {job_id}: too many concurrent updates")

    def _delete_once(self, job_id: str) -> bool:
        with write_tx(self.engine) as conn:
            job = rows.fetch(conn, job_id)
            if job is None:
                raise JobNotFound(job_id)
            transitions.check_deletable(job)
            # Version-guarded: a worker claiming it meanwhile makes us re-check.
            stmt = sa.delete(jobs).where(jobs.c.id == job.id, jobs.c.version == job.version)
            return conn.execute(stmt).rowcount == 1

    def purge_succeeded(self, older_than: timedelta) -> int:
        """Drop SUCCESS rows finished before now - older_than (they only keep history)."""
        cutoff: datetime = self.clock.now() - older_than
        stmt = sa.delete(jobs).where(
            jobs.c.status == JobStatus.SUCCESS.value, jobs.c.finished_at < to_db(cutoff)
        )

        def run() -> int:
            with write_tx(self.engine) as conn:
                return conn.execute(stmt).rowcount

        return retry_transient(run)


def _filter_clauses(filters: JobFilter) -> list[sa.ColumnElement[bool]]:
    clauses = []
    if filters.status is not None:
        clauses.append(jobs.c.status == JobStatus.parse(filters.status).value)
    if filters.job_type is not None:
        clauses.append(jobs.c.job_type == filters.job_type)
    if filters.project_id is not None:
        clauses.append(jobs.c.project_id == filters.project_id)
    if filters.resource_id is not None:
        clauses.append(jobs.c.resource_id == filters.resource_id)
    return clauses


def _after_marker(conn: Connection, marker: str) -> sa.ColumnElement[bool]:
    anchor = rows.fetch(conn, marker)
    if anchor is None:
        raise InvalidJobRequest(f"marker: unknown job {marker}")
    created = to_db(anchor.created_at)
    # Row-value comparison spelled out: portable to every dialect.
    return sa.or_(
        jobs.c.created_at < created,
        sa.and_(jobs.c.created_at == created, jobs.c.id < anchor.id),
    )
