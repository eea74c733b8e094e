"""Project -> region bindings: where the gateway places a project's new servers and
volumes when the request names no region (docs/gateway.md). Oldest binding first.

The gateway binds on first placement (``bind``, idempotent); operators manage bindings
through the Admin API (``create``, which refuses a duplicate, ``get``, ``delete``)."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from isthmus.db import read_tx, write_tx
from isthmus.registry import schema
from isthmus.registry.errors import Conflict, Invalid, NotFound
from isthmus.registry.models import Binding
from isthmus.registry.store import MAX_LIMIT, checked_text


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _binding(row: sa.RowMapping) -> Binding:
    return Binding(row["id"], row["project_id"], row["pod_id"], row["created_at"])


class Bindings:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def list(self, project_id: str | None = None, pod_id: str | None = None, limit: int | None = None,
             marker: int | None = None) -> list[Binding]:
        """Oldest first (created_at, then id): the order the gateway tries them in.
        ``marker`` is the id of the last binding of the previous page."""
        c = schema.bindings.c
        query = sa.select(schema.bindings).order_by(c.created_at, c.id)
        if project_id is not None:
            query = query.where(c.project_id == project_id)
        if pod_id is not None:
            query = query.where(c.pod_id == pod_id)
        if limit is not None:
            if not 1 <= limit <= MAX_LIMIT:
                raise Invalid(f"limit: must be between 1 and {MAX_LIMIT}")
            query = query.limit(limit)
        if marker is not None:
            after = self.get(marker)  # an unknown marker is an error, not an empty page
            query = query.where(sa.or_(c.created_at > after.created_at,
                                       sa.and_(c.created_at == after.created_at, c.id > after.id)))
        with read_tx(self.engine) as conn:
            return [_binding(r) for r in conn.execute(query).mappings()]

    def counts(self) -> dict[str, int]:
        """Projects bound to each pod (pods with none are absent)."""
        c = schema.bindings.c
        query = sa.select(c.pod_id, sa.func.count()).group_by(c.pod_id)
        with read_tx(self.engine) as conn:
            return {pod_id: int(n) for pod_id, n in conn.execute(query)}

    def get(self, binding_id: int) -> Binding:
        with read_tx(self.engine) as conn:
            row = conn.execute(sa.select(schema.bindings).where(schema.bindings.c.id == binding_id)).mappings().first()
        if row is None:
            raise NotFound(f"binding {binding_id} not found")
        return _binding(row)

    def create(self, project_id: object, pod_id: object) -> Binding:
        """Bind a project to a regional pod; an existing binding is a Conflict."""
        project = checked_text("project_id", project_id)
        pod = checked_text("pod_id", pod_id, max_len=36)
        self._check_pod(pod)
        try:
            with write_tx(self.engine) as conn:
                key = conn.execute(schema.bindings.insert().values(
                    project_id=project, pod_id=pod, created_at=_now())).inserted_primary_key
                assert key is not None  # a single-row INSERT always has one
                new_id = key[0]
        except sa.exc.IntegrityError:
            if self.list(project, pod):
                raise Conflict(f"binding: project {project} is already bound to pod {pod}") from None
            self._check_pod(pod)  # deleted meanwhile: say so
            raise
        return self.get(new_id)

    def delete(self, binding_id: int) -> None:
        with write_tx(self.engine) as conn:
            deleted = conn.execute(schema.bindings.delete().where(schema.bindings.c.id == binding_id)).rowcount
        if not deleted:
            raise NotFound(f"binding {binding_id} not found")

    def _check_pod(self, pod_id: str) -> None:
        with read_tx(self.engine) as conn:
            pod = conn.execute(sa.select(schema.pods).where(schema.pods.c.pod_id == pod_id)).mappings().first()
        if pod is None:
            raise Invalid(f"pod_id: no pod {pod_id}")
        if not pod["az_name"]:
            raise Invalid("pod_id: the central pod cannot be bound to a project")

    def bind(self, project_id: str, pod_id: str) -> Binding:
        """Bind a project to a regional pod; idempotent."""
        if not project_id or not pod_id:
            raise Invalid("project_id and pod_id are required")
        self._check_pod(pod_id)
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
