"""The gateway's own tables: what every gateway process must agree on.

- ``isthmus_gateway_creates``: idempotent creates, keyed by the client's request id
  and body, so a retry through another process (or after a timeout) finds the
  first attempt instead of making a second server.
- ``isthmus_quota_reservations`` / ``isthmus_quota_locks``: quota admitted but not
  yet visible in the regions' usage, counted by every process's check.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Engine

Timestamp = sa.DateTime(timezone=False).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

metadata = sa.MetaData()

creates = sa.Table(
    "isthmus_gateway_creates", metadata,
    sa.Column("key", sa.String(64), primary_key=True),  # sha256 hex of project, API, kind, request id, body
    sa.Column("project_id", sa.String(255), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),  # pending | done | unknown
    sa.Column("owner", sa.String(36), nullable=False),  # the attempt that may settle the row
    sa.Column("region", sa.String(255), nullable=True),
    sa.Column("resource_id", sa.String(127), nullable=True),
    sa.Column("reply", sa.Text, nullable=True),  # JSON: status, headers, body of a done create
    sa.Column("started_at", Timestamp, nullable=False),  # when the create was sent to the region
    sa.Column("updated_at", Timestamp, nullable=False),
)
sa.Index("ix_isthmus_gateway_creates_updated_at", creates.c.updated_at)

quota_reservations = sa.Table(
    "isthmus_quota_reservations", metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("service", sa.String(16), nullable=False),  # compute | volume
    sa.Column("project_id", sa.String(255), nullable=False),
    sa.Column("deltas", sa.Text, nullable=False),  # JSON: resource -> amount
    sa.Column("created_at", Timestamp, nullable=False),
    # From when the region's own usage surely shows what was made: the create's
    # reply (volumes), or the moment a server was seen out of the scheduler.
    sa.Column("settled_at", Timestamp, nullable=True),
    sa.Column("expires_at", Timestamp, nullable=False),
    # A server create answered 202 and not yet counted by Nova: its region, and
    # JSON {"server": id} or {"reservation_id": r} to look it up by.
    sa.Column("region", sa.String(255), nullable=True),
    sa.Column("watch", sa.Text, nullable=True),
)
sa.Index("ix_isthmus_quota_reservations_project", quota_reservations.c.service, quota_reservations.c.project_id)

quota_locks = sa.Table(
    "isthmus_quota_locks", metadata,
    sa.Column("service", sa.String(16), primary_key=True),
    sa.Column("project_id", sa.String(255), primary_key=True),
)


def create_schema(engine: Engine) -> None:
    """Unversioned tables for fast test fixtures; services require ``isthmus db upgrade``."""
    metadata.create_all(engine)
