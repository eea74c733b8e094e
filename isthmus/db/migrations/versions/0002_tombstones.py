"""Tombstones: central's deletes, recorded as proof for the reconcilers.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

Expand-only: a new table. Services of the previous release ignore it (they keep
deleting copies on a 404, as before) and keep working during a rolling upgrade.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

Timestamp = sa.DateTime(timezone=False).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "isthmus_tombstones",
        sa.Column("resource_type", sa.String(64), primary_key=True),
        sa.Column("resource_id", sa.String(127), primary_key=True),
        sa.Column("project_id", sa.String(255), nullable=False),
        sa.Column("deleted_at", Timestamp, nullable=False),
    )
    op.create_index("ix_isthmus_tombstones_deleted_at", "isthmus_tombstones", ["deleted_at"])
