"""OVN tunnel keys of stretched networks and their ports.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-04

Expand-only: a new table. A worker of the previous release has no OVN backend
and ignores it.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

Timestamp = sa.DateTime(timezone=False).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "isthmus_tunnel_keys",
        sa.Column("scope", sa.String(36), primary_key=True),
        sa.Column("resource_id", sa.String(36), primary_key=True),
        sa.Column("tunnel_key", sa.Integer, nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.UniqueConstraint("scope", "tunnel_key", name="uq_isthmus_tunnel_keys_key"),
    )
