"""Project -> region bindings: where the gateway places a project's new servers and
volumes when the request names no region (reference §5.1). Oldest binding first."""

from __future__ import annotations

from datetime import datetime, timezone

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from isthmus.db import read_tx, write_tx
from isthmus.registry import schema
from isthmus.registry.errors import Invalid, NotFound
from isthmus.registry.models import Binding


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Bindings:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def list(self, project_id: str | None = None) -> list[Binding]:
        c = schema.bindings.c
        query = sa.select(schema.bindings).order_by(c.created_at, c.id)
        if project_id is not None:
            query = query.where(c.project_id == project_id)
        with read_tx(self.engine) as conn:
            return [Binding(r["id"], r["project_id"], r["pod_id"], r["created_at"])
                    for r in conn.execute(query).mappings()]

    def bind(self, project_id: str, pod_id: str) -> Binding:
        """Bind a project to a regional pod; idempotent."""
        if not project_id or not pod_id:
            raise Invalid("project_id and pod_id are required")
        with read_tx(self.engine) as conn:
            pod = conn.execute(sa.select(schema.pods).where(schema.pods.c.pod_id == pod_id)).mappings().first()
        if pod is None:
            raise Invalid(f"pod_id: no pod {pod_id}")
        if not pod["az_name"]:
            raise Invalid("pod_id: the central pod cannot be bound to a project")
        if not any(b.pod_id == pod_id for b in self.list(project_id)):
            try:
                with write_tx(self.engine) as conn:
                    conn.execute(schema.bindings.insert().values(project_id=project_id, pod_id=pod_id,
                                                                 created_at=_now()))
            except sa.exc.IntegrityError:
                pass  # a concurrent bind won: same outcome
        return next(b for b in self.list(project_id) if b.pod_id == pod_id)

    def unbind(self, project_id: str, pod_id: str) -> None:
        c = schema.bindings.c
        with write_tx(self.engine) as conn:
            deleted = conn.execute(schema.bindings.delete().where(
                c.project_id == project_id, c.pod_id == pod_id)).rowcount
        if not deleted:
            raise NotFound(f"no binding of project {project_id} to pod {pod_id}")
