"""Tombstones: which central objects central itself deleted (proof of deletion).

Central's ML2 driver buries an object in its delete postcommit; a reconciler
that finds an object missing at central removes the regional copies only if it
is buried. Old tombstones are purged: by then every copy has been removed (a
region that was down longer keeps its copies until an operator acts, which is
the safe side).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from isthmus.db import read_tx, retry_transient, write_tx
from isthmus.registry import schema

_CHUNK = 500  # ids per IN (...) query: below every dialect's parameter limit


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class Tombstones:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def bury(self, resource_type: str, resource_id: str, project_id: str | None = None, *,
             attempts: int = 8) -> None:
        """Record central's delete (idempotent: a second delete event keeps the first time).
        ``attempts``: tries after transient errors (a lock), each bounded by the
        engine's timeouts."""
        row = {"resource_type": resource_type, "resource_id": resource_id,
               "project_id": project_id or "", "deleted_at": _now()}

        def insert() -> None:
            with write_tx(self.engine) as conn:
                t = schema.tombstones
                exists = conn.execute(sa.select(t.c.resource_id).where(
                    t.c.resource_type == resource_type, t.c.resource_id == resource_id)).first()
                if exists is None:
                    conn.execute(t.insert().values(**row))

        retry_transient(insert, attempts=attempts)

    def buried(self, resource_type: str, resource_ids: Iterable[str]) -> set[str]:
        """The ids among ``resource_ids`` that central deleted."""
        ids = sorted(set(resource_ids))
        found: set[str] = set()
        t = schema.tombstones
        with read_tx(self.engine) as conn:
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start:start + _CHUNK]
                found.update(conn.execute(sa.select(t.c.resource_id).where(
                    t.c.resource_type == resource_type, t.c.resource_id.in_(chunk))).scalars())
        return found

    def is_buried(self, resource_type: str, resource_id: str) -> bool:
        return bool(self.buried(resource_type, [resource_id]))

    def purge(self, older_than: timedelta) -> int:
        t = schema.tombstones
        with write_tx(self.engine) as conn:
            return conn.execute(t.delete().where(t.c.deleted_at < _now() - older_than)).rowcount
