"""Gateway state shared by its processes: idempotent creates, quota reservations.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

Expand-only: new tables. A gateway of the previous release ignores them (it keeps
its in-process duplicate check) and keeps working during a rolling upgrade.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

Timestamp = sa.DateTime(timezone=False).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "isthmus_gateway_creates",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("project_id", sa.String(255), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("owner", sa.String(36), nullable=False),
        sa.Column("region", sa.String(255), nullable=True),
        sa.Column("resource_id", sa.String(127), nullable=True),
        sa.Column("reply", sa.Text, nullable=True),
        sa.Column("started_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
    )
    op.create_index("ix_isthmus_gateway_creates_updated_at", "isthmus_gateway_creates", ["updated_at"])
    op.create_table(
        "isthmus_quota_reservations",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("service", sa.String(16), nullable=False),
        sa.Column("project_id", sa.String(255), nullable=False),
        sa.Column("deltas", sa.Text, nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("settled_at", Timestamp, nullable=True),
        sa.Column("expires_at", Timestamp, nullable=False),
    )
    op.create_index("ix_isthmus_quota_reservations_project", "isthmus_quota_reservations",
                    ["service", "project_id"])
    op.create_table(
        "isthmus_quota_locks",
        sa.Column("service", sa.String(16), primary_key=True),
        sa.Column("project_id", sa.String(255), primary_key=True),
    )
