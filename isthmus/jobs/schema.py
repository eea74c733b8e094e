"""Tables of the job engine (SQLAlchemy Core) and row <-> record conversion.

One row per (job_type, resource_id): the UNIQUE key is what makes coalescing
and "one runner per key" hold on every dialect without locks.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, overload

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Engine, RowMapping

from isthmus.jobs.models import MAX_PROJECT_LEN, MAX_RESOURCE_LEN, MAX_TYPE_LEN, Job, JobStatus

metadata = sa.MetaData()

# MariaDB/MySQL DATETIME keeps whole seconds unless asked for microseconds;
# sub-second run_after and lease expiry need them.
Timestamp = sa.DateTime(timezone=False).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

jobs = sa.Table(
    "isthmus_jobs",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("job_type", sa.String(MAX_TYPE_LEN), nullable=False),
    sa.Column("resource_id", sa.String(MAX_RESOURCE_LEN), nullable=False),
    sa.Column("project_id", sa.String(MAX_PROJECT_LEN), nullable=True),
    sa.Column("payload", sa.JSON(none_as_null=True), nullable=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False, default=0),
    sa.Column("failures", sa.Integer, nullable=False, default=0),
    sa.Column("rerun", sa.Boolean, nullable=False, default=False),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("run_after", Timestamp, nullable=False),
    sa.Column("lease_owner", sa.String(255), nullable=True),
    sa.Column("lease_token", sa.String(36), nullable=True),
    sa.Column("lease_expires_at", Timestamp, nullable=True),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("updated_at", Timestamp, nullable=False),
    sa.Column("started_at", Timestamp, nullable=True),
    sa.Column("finished_at", Timestamp, nullable=True),
    sa.Column("version", sa.Integer, nullable=False, default=1),
    sa.UniqueConstraint("job_type", "resource_id", name="uq_isthmus_jobs_key"),
    # The claim query: due NEW jobs and expired RUNNING ones.
    sa.Index("ix_isthmus_jobs_claim", "status", "run_after"),
    sa.Index("ix_isthmus_jobs_listing", "created_at", "id"),
    sa.Index("ix_isthmus_jobs_project", "project_id"),
)

# One row per periodic resync: whoever advances next_run_at owns that tick.
schedules = sa.Table(
    "isthmus_job_schedules",
    metadata,
    sa.Column("name", sa.String(MAX_TYPE_LEN), primary_key=True),
    sa.Column("next_run_at", Timestamp, nullable=False),
    sa.Column("last_owner", sa.String(255), nullable=True),
)


def create_schema(engine: Engine) -> None:
    """Create the engine's tables if missing, unversioned (fast test fixtures).

    Services require the versioned schema: ``isthmus db upgrade`` (isthmus.db.migration)."""
    metadata.create_all(engine, checkfirst=True)


def drop_schema(engine: Engine) -> None:
    metadata.drop_all(engine, checkfirst=True)


def to_db(value: datetime | None) -> datetime | None:
    """Aware UTC -> naive UTC: every dialect stores the same wall time."""
    if value is None:
        return None
    return value.astimezone(UTC).replace(tzinfo=None)


# A NOT NULL column's value is a datetime; a nullable one's may be None.
@overload
def from_db(value: datetime | str) -> datetime: ...
@overload
def from_db(value: None) -> None: ...
def from_db(value: datetime | str | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):  # defensive: raw SQLite text
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC)


def row_to_job(row: RowMapping) -> Job:
    return Job(
        id=row["id"],
        job_type=row["job_type"],
        resource_id=row["resource_id"],
        project_id=row["project_id"],
        payload=dict(row["payload"] or {}),
        status=JobStatus(row["status"]),
        attempt=row["attempt"],
        failures=row["failures"],
        rerun=bool(row["rerun"]),
        last_error=row["last_error"],
        run_after=from_db(row["run_after"]),
        lease_owner=row["lease_owner"],
        lease_token=row["lease_token"],
        lease_expires_at=from_db(row["lease_expires_at"]),
        created_at=from_db(row["created_at"]),
        updated_at=from_db(row["updated_at"]),
        started_at=from_db(row["started_at"]),
        finished_at=from_db(row["finished_at"]),
        version=row["version"],
    )


def values_to_db(values: dict[str, Any]) -> dict[str, Any]:
    """Convert the datetimes of a column->value dict for storage."""
    return {k: to_db(v) if isinstance(v, datetime) else v for k, v in values.items()}
