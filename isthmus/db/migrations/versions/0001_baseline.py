"""Baseline: the registry (pods, routings, pod bindings) and the job engine
(jobs, periodic schedules), as created before versioned migrations.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Creates only the tables that are missing, so a database made by an earlier
Isthmus (``metadata.create_all`` at service start; a service made only the
tables it used) is adopted as it is. Expand-only.

Frozen: later schema changes get their own migration; this file never changes.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# MariaDB/MySQL DATETIME keeps whole seconds unless asked for microseconds.
Timestamp = sa.DateTime(timezone=False).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
BigId = sa.BigInteger().with_variant(sa.Integer, "sqlite")  # SQLite autoincrements INTEGER only


def _missing(name: str) -> bool:
    return not sa.inspect(op.get_bind()).has_table(name)


def upgrade() -> None:
    if _missing("isthmus_pods"):
        op.create_table(
            "isthmus_pods",
            sa.Column("pod_id", sa.String(36), primary_key=True),
            sa.Column("region_name", sa.String(255), nullable=False, unique=True),
            sa.Column("az_name", sa.String(255), nullable=False),
            sa.Column("pod_az_name", sa.String(255), nullable=False),
            sa.Column("dc_name", sa.String(255), nullable=False),
        )
    if _missing("isthmus_routings"):
        op.create_table(
            "isthmus_routings",
            sa.Column("id", BigId, primary_key=True, autoincrement=True),
            sa.Column("top_id", sa.String(127), nullable=False),
            sa.Column("bottom_id", sa.String(36), nullable=True),
            sa.Column("pod_id", sa.String(36), sa.ForeignKey("isthmus_pods.pod_id", ondelete="CASCADE"),
                      nullable=False),
            sa.Column("project_id", sa.String(255), nullable=False),
            sa.Column("resource_type", sa.String(64), nullable=False),
            sa.Column("created_at", Timestamp, nullable=False),
            sa.Column("updated_at", Timestamp, nullable=False),
            sa.UniqueConstraint("top_id", "pod_id", "resource_type", name="uq_isthmus_routings_copy"),
        )
        op.create_index("ix_isthmus_routings_bottom_id", "isthmus_routings", ["bottom_id"])
        op.create_index("ix_isthmus_routings_top", "isthmus_routings", ["top_id", "resource_type"])
    if _missing("isthmus_pod_bindings"):
        op.create_table(
            "isthmus_pod_bindings",
            sa.Column("id", BigId, primary_key=True, autoincrement=True),
            sa.Column("project_id", sa.String(255), nullable=False),
            sa.Column("pod_id", sa.String(36), sa.ForeignKey("isthmus_pods.pod_id", ondelete="CASCADE"),
                      nullable=False),
            sa.Column("created_at", Timestamp, nullable=False),
            sa.UniqueConstraint("project_id", "pod_id", name="uq_isthmus_pod_bindings"),
        )
    if _missing("isthmus_jobs"):
        op.create_table(
            "isthmus_jobs",
            sa.Column("id", sa.String(36), primary_key=True),
            sa.Column("job_type", sa.String(64), nullable=False),
            sa.Column("resource_id", sa.String(255), nullable=False),
            sa.Column("project_id", sa.String(64), nullable=True),
            sa.Column("payload", sa.JSON(), nullable=True),
            sa.Column("status", sa.String(16), nullable=False),
            sa.Column("attempt", sa.Integer, nullable=False),
            sa.Column("failures", sa.Integer, nullable=False),
            sa.Column("rerun", sa.Boolean, nullable=False),
            sa.Column("last_error", sa.Text, nullable=True),
            sa.Column("run_after", Timestamp, nullable=False),
            sa.Column("lease_owner", sa.String(255), nullable=True),
            sa.Column("lease_token", sa.String(36), nullable=True),
            sa.Column("lease_expires_at", Timestamp, nullable=True),
            sa.Column("created_at", Timestamp, nullable=False),
            sa.Column("updated_at", Timestamp, nullable=False),
            sa.Column("started_at", Timestamp, nullable=True),
            sa.Column("finished_at", Timestamp, nullable=True),
            sa.Column("version", sa.Integer, nullable=False),
            sa.UniqueConstraint("job_type", "resource_id", name="uq_isthmus_jobs_key"),
        )
        op.create_index("ix_isthmus_jobs_claim", "isthmus_jobs", ["status", "run_after"])
        op.create_index("ix_isthmus_jobs_listing", "isthmus_jobs", ["created_at", "id"])
        op.create_index("ix_isthmus_jobs_project", "isthmus_jobs", ["project_id"])
    if _missing("isthmus_job_schedules"):
        op.create_table(
            "isthmus_job_schedules",
            sa.Column("name", sa.String(64), primary_key=True),
            sa.Column("next_run_at", Timestamp, nullable=False),
            sa.Column("last_owner", sa.String(255), nullable=True),
        )
