"""Tables of the registry (SQLAlchemy Core), in the Isthmus database."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Engine

metadata = sa.MetaData()
Timestamp = sa.DateTime(timezone=False).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

pods = sa.Table(
    "isthmus_pods",
    metadata,
    sa.Column("pod_id", sa.String(36), primary_key=True),
    sa.Column("region_name", sa.String(255), nullable=False, unique=True),
    sa.Column("az_name", sa.String(255), nullable=False, default=""),
    sa.Column("pod_az_name", sa.String(255), nullable=False, default=""),
    sa.Column("dc_name", sa.String(255), nullable=False, default=""),
)

routings = sa.Table(
    "isthmus_routings",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
    sa.Column("top_id", sa.String(127), nullable=False),
    sa.Column("bottom_id", sa.String(36), nullable=True, index=True),
    sa.Column("pod_id", sa.String(36), sa.ForeignKey("isthmus_pods.pod_id", ondelete="CASCADE"), nullable=False),
    sa.Column("project_id", sa.String(255), nullable=False, default=""),
    sa.Column("resource_type", sa.String(64), nullable=False),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("updated_at", Timestamp, nullable=False),
    # One copy of a central resource per region: the key that makes claims atomic.
    sa.UniqueConstraint("top_id", "pod_id", "resource_type", name="uq_isthmus_routings_copy"),
    sa.Index("ix_isthmus_routings_top", "top_id", "resource_type"),
)

# Tenant -> region affinity (gateway scheduling): where a project's new servers and
# volumes go when it names no region; the oldest binding matching the AZ wins.
bindings = sa.Table(
    "isthmus_pod_bindings",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
    sa.Column("project_id", sa.String(255), nullable=False),
    sa.Column("pod_id", sa.String(36), sa.ForeignKey("isthmus_pods.pod_id", ondelete="CASCADE"), nullable=False),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.UniqueConstraint("project_id", "pod_id", name="uq_isthmus_pod_bindings"),
)

# Proof of deletion: central's own delete event, recorded. Reconcilers remove a
# regional copy only when central answers "not found" *and* buried it here; a
# 404 alone (a restore, a misrouted request) never deletes anything.
tombstones = sa.Table(
    "isthmus_tombstones",
    metadata,
    sa.Column("resource_type", sa.String(64), primary_key=True),
    sa.Column("resource_id", sa.String(127), primary_key=True),
    sa.Column("project_id", sa.String(255), nullable=False, default=""),
    sa.Column("deleted_at", Timestamp, nullable=False),
    sa.Index("ix_isthmus_tombstones_deleted_at", "deleted_at"),
)

# OVN tunnel keys every OVN region of a stretched network must agree on
# (docs/ovn.md): a network's datapath key (scope "") and its ports' keys (scope:
# the network id). Unique per scope, allocated centrally, freed on proof of delete.
tunnel_keys = sa.Table(
    "isthmus_tunnel_keys",
    metadata,
    sa.Column("scope", sa.String(36), primary_key=True),
    sa.Column("resource_id", sa.String(36), primary_key=True),
    sa.Column("tunnel_key", sa.Integer, nullable=False),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.UniqueConstraint("scope", "tunnel_key", name="uq_isthmus_tunnel_keys_key"),
)


def create_schema(engine: Engine) -> None:
    """Unversioned tables for fast test fixtures; services require ``isthmus db upgrade``."""
    metadata.create_all(engine)


def drop_schema(engine: Engine) -> None:
    metadata.drop_all(engine)
