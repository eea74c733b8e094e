"""Quota reservations of server creates wait for Nova to count the server.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04

Expand-only: two nullable columns. A gateway of the previous release never sets
them and settles at the 202, as it did.
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("isthmus_quota_reservations", sa.Column("region", sa.String(255), nullable=True))
    op.add_column("isthmus_quota_reservations", sa.Column("watch", sa.Text, nullable=True))
