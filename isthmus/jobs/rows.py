"""Compare-and-set access to job rows: the one write path of the engine.

Every state change reads the row, computes new values with a pure function of
``transitions``, and writes them with ``WHERE id = :id AND version = :seen``.
A lost race changes zero rows and is retried in a new transaction (a new
snapshot, which matters under MariaDB's REPEATABLE READ defaults too).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from isthmus.db import retry_transient, write_tx
from isthmus.jobs.clock import Clock
from isthmus.jobs.errors import ConcurrentUpdate, JobNotFound
from isthmus.jobs.models import Job
from isthmus.jobs.schema import jobs, row_to_job, values_to_db
from isthmus.jobs.transitions import Values

MAX_CAS_ROUNDS = 50

# Computes the new values from the current row; None means "leave it as is".
Mutation = Callable[[Job, datetime], Values | None]


def fetch(conn: Connection, job_id: str) -> Job | None:
    row = conn.execute(sa.select(jobs).where(jobs.c.id == job_id)).mappings().first()
    return row_to_job(row) if row else None


def fetch_key(conn: Connection, job_type: str, resource_id: str) -> Job | None:
    query = sa.select(jobs).where(jobs.c.job_type == job_type, jobs.c.resource_id == resource_id)
    row = conn.execute(query).mappings().first()
    return row_to_job(row) if row else None


def cas(conn: Connection, job: Job, values: Values, now: datetime) -> bool:
    """Apply ``values`` if the row is still at ``job.version``; True if it was."""
    stmt = (
        sa.update(jobs)
        .where(jobs.c.id == job.id, jobs.c.version == job.version)
        .values(**values_to_db({**values, "updated_at": now}), version=job.version + 1)
    )
    return conn.execute(stmt).rowcount == 1


def mutate(engine: Engine, clock: Clock, job_id: str, mutation: Mutation) -> Job:
    """Apply ``mutation`` to one job atomically; raises what the mutation raises."""
    for _ in range(MAX_CAS_ROUNDS):
        result = retry_transient(lambda: _mutate_once(engine, clock, job_id, mutation))
        if result is not None:
            return result
    raise ConcurrentUpdate(f"job {job_id}: too many concurrent updates")


def _mutate_once(engine: Engine, clock: Clock, job_id: str, mutation: Mutation) -> Job | None:
    with write_tx(engine) as conn:
        job = fetch(conn, job_id)
        if job is None:
            raise JobNotFound(job_id)
        now = clock.now()
        values = mutation(job, now)
        if values is None:
            return job
        if not cas(conn, job, values, now):
            return None
        return fetch(conn, job_id)
