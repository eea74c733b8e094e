"""The region registry: pods and routings, read by every Isthmus component."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine, RowMapping

from isthmus.db import read_tx, retry_transient, write_tx
from isthmus.registry import schema
from isthmus.registry.errors import Conflict, Invalid, NotFound, UnknownAvailabilityZone
from isthmus.registry.models import RESOURCE_TYPES, Pod, Routing

ROUTING_FILTERS = ("id", "top_id", "bottom_id", "pod_id", "project_id", "resource_type")
MAX_LIMIT = 2000


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _pod(row: RowMapping) -> Pod:
    return Pod(row["pod_id"], row["region_name"], row["az_name"] or "", row["pod_az_name"] or "", row["dc_name"] or "")


def _routing(row: RowMapping) -> Routing:
    return Routing(**{c: row[c] for c in Routing.__dataclass_fields__})


def checked_text(field: str, value: Any, required: bool = True, max_len: int = 255) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise Invalid(f"{field}: must be a string")
    text: str = value.strip()
    if required and not text:
        raise Invalid(f"{field}: is required")
    if len(text) > max_len:
        raise Invalid(f"{field}: longer than {max_len} characters")
    return text


def regions_for_hints(pods: Iterable[Pod], hints: Iterable[str]) -> list[str]:
    """The regions an object with these AZ hints may live in (all, for no hints).

    Each hint is an AZ name or a regional region name; anything else is an error."""
    regional = [p for p in pods if not p.is_central]
    hints = list(hints)
    if not hints:
        return [p.region_name for p in regional]
    regions: list[str] = []
    for hint in hints:
        matched = [p.region_name for p in regional if hint in (p.az_name, p.region_name)]
        if not matched:
            raise UnknownAvailabilityZone(hint)
        regions += [r for r in matched if r not in regions]
    return regions


class Registry:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # --- pods ----------------------------------------------------------------
    def create_pod(self, region_name: object, az_name: object = "", pod_az_name: object = "",
                   dc_name: object = "") -> Pod:
        """The values as a request carries them: checked here (strings, lengths)."""
        region_name = checked_text("region_name", region_name)
        az_name = checked_text("az_name", az_name, required=False)
        pod = Pod(str(uuid.uuid4()), region_name, az_name,
                  "" if not az_name else checked_text("pod_az_name", pod_az_name, required=False),
                  checked_text("dc_name", dc_name, required=False))

        def insert() -> Pod:
            with write_tx(self.engine) as conn:
                existing = [_pod(r) for r in conn.execute(sa.select(schema.pods)).mappings()]
                if any(p.region_name == region_name for p in existing):
                    raise Conflict(f"region_name: a pod for region {region_name!r} exists")
                central = next((p for p in existing if p.is_central), None)
                if pod.is_central and central:
                    raise Conflict(f"az_name: the central pod exists already ({central.region_name})")
                if pod.region_name in {p.az_name for p in existing if p.az_name}:
                    raise Conflict(f"region_name: {region_name!r} is already an availability zone name")
                conn.execute(schema.pods.insert().values(**pod.to_dict()))
                return pod

        try:
            return retry_transient(insert)
        except sa.exc.IntegrityError as err:
            raise Conflict(f"region_name: a pod for region {region_name!r} exists") from err

    def ensure_pod(self, region_name: str, az_name: str = "") -> Pod:
        """Idempotent registration (used by deployment tooling)."""
        found = self.find_pod(region_name)
        if found:
            if found.az_name != az_name:
                raise Conflict(f"az_name: region {region_name!r} is registered in {found.az_name!r}")
            return found
        return self.create_pod(region_name, az_name)

    def pods(self) -> list[Pod]:
        with read_tx(self.engine) as conn:
            rows = conn.execute(sa.select(schema.pods).order_by(schema.pods.c.region_name)).mappings()
            return [_pod(r) for r in rows]

    def get_pod(self, pod_id: str) -> Pod:
        with read_tx(self.engine) as conn:
            row = conn.execute(sa.select(schema.pods).where(schema.pods.c.pod_id == pod_id)).mappings().first()
        if row is None:
            raise NotFound(f"pod {pod_id} not found")
        return _pod(row)

    def find_pod(self, region_name: str) -> Pod | None:
        with read_tx(self.engine) as conn:
            query = sa.select(schema.pods).where(schema.pods.c.region_name == region_name)
            row = conn.execute(query).mappings().first()
        return _pod(row) if row else None

    def delete_pod(self, pod_id: str) -> None:
        with write_tx(self.engine) as conn:
            # Explicit, not ON DELETE CASCADE: SQLite enforces foreign keys only when asked.
            conn.execute(schema.routings.delete().where(schema.routings.c.pod_id == pod_id))
            conn.execute(schema.bindings.delete().where(schema.bindings.c.pod_id == pod_id))
            deleted = conn.execute(schema.pods.delete().where(schema.pods.c.pod_id == pod_id)).rowcount
        if not deleted:
            raise NotFound(f"pod {pod_id} not found")

    def holdings(self, pod_id: str, resource_types: Iterable[str]) -> dict[str, list[str]]:
        """The central ids of ``resource_types`` routed to ``pod_id`` (what still lives in that
        region), by type; a type with none is left out."""
        c = schema.routings.c
        query = (sa.select(c.resource_type, c.top_id)
                 .where(c.pod_id == pod_id, c.resource_type.in_(list(resource_types)))
                 .order_by(c.resource_type, c.top_id))
        out: dict[str, list[str]] = {}
        with read_tx(self.engine) as conn:
            for kind, top_id in conn.execute(query):
                out.setdefault(kind, []).append(top_id)
        return out

    def central_pod(self) -> Pod | None:
        return next((p for p in self.pods() if p.is_central), None)

    def regional_pods(self) -> list[Pod]:
        return [p for p in self.pods() if not p.is_central]

    def availability_zones(self) -> dict[str, list[str]]:
        """AZ name -> region names in it."""
        zones: dict[str, list[str]] = {}
        for pod in self.regional_pods():
            zones.setdefault(pod.az_name, []).append(pod.region_name)
        return zones

    def regions_for_hints(self, hints: Iterable[str]) -> list[str]:
        return regions_for_hints(self.pods(), hints)

    # --- routings ------------------------------------------------------------
    def create_routing(self, top_id: str, bottom_id: str | None, pod_id: str, project_id: str,
                       resource_type: str) -> Routing:
        values = self._routing_values({"top_id": top_id, "bottom_id": bottom_id, "pod_id": pod_id,
                                       "project_id": project_id, "resource_type": resource_type},
                                      require_bottom=bottom_id is not None)
        now = _now()

        def insert() -> Routing:
            with write_tx(self.engine) as conn:
                result = conn.execute(schema.routings.insert().values(**values, created_at=now, updated_at=now))
                key = result.inserted_primary_key
                assert key is not None  # a single-row INSERT always has one
                row = conn.execute(sa.select(schema.routings).where(
                    schema.routings.c.id == key[0])).mappings().one()
                return _routing(row)

        try:
            return retry_transient(insert)
        except sa.exc.IntegrityError as err:
            raise Conflict(f"a routing for {resource_type} {top_id} in pod {pod_id} exists") from err

    def ensure_routing(self, top_id: str, bottom_id: str, pod_id: str, project_id: str, resource_type: str) -> Routing:
        """Record a copy; idempotent (an existing row gets the bottom id)."""
        existing = self.find_routing(top_id, pod_id, resource_type)
        if existing is None:
            try:
                return self.create_routing(top_id, bottom_id, pod_id, project_id, resource_type)
            except Conflict:
                existing = self.find_routing(top_id, pod_id, resource_type)
                assert existing is not None
        if existing.bottom_id == bottom_id:
            return existing
        return self.update_routing(existing.id, {"bottom_id": bottom_id})

    def find_routing(self, top_id: str, pod_id: str, resource_type: str) -> Routing | None:
        c = schema.routings.c
        with read_tx(self.engine) as conn:
            row = conn.execute(sa.select(schema.routings).where(
                c.top_id == top_id, c.pod_id == pod_id, c.resource_type == resource_type)).mappings().first()
        return _routing(row) if row else None

    def routings_of(self, top_id: str, resource_type: str) -> list[Routing]:
        c = schema.routings.c
        with read_tx(self.engine) as conn:
            rows = conn.execute(sa.select(schema.routings).where(
                c.top_id == top_id, c.resource_type == resource_type).order_by(c.id)).mappings()
            return [_routing(r) for r in rows]

    def get_routing(self, routing_id: int) -> Routing:
        with read_tx(self.engine) as conn:
            row = conn.execute(sa.select(schema.routings).where(schema.routings.c.id == routing_id)).mappings().first()
        if row is None:
            raise NotFound(f"routing {routing_id} not found")
        return _routing(row)

    def list_routings(self, filters: Mapping[str, Any] | None = None, limit: int = MAX_LIMIT,
                      marker: int | None = None) -> list[Routing]:
        """Newest first (id descending); ``marker`` is the last id of the previous page."""
        filters = dict(filters or {})
        unknown = sorted(set(filters) - set(ROUTING_FILTERS))
        if unknown:
            raise Invalid(f"unsupported filter(s): {', '.join(unknown)}")
        if not 1 <= limit <= MAX_LIMIT:
            raise Invalid(f"limit: must be between 1 and {MAX_LIMIT}")
        c = schema.routings.c
        query = sa.select(schema.routings).order_by(c.id.desc()).limit(limit)
        for key, value in filters.items():
            query = query.where(getattr(c, key) == value)
        if marker is not None:
            self.get_routing(marker)  # an unknown marker is an error, not an empty page
            query = query.where(c.id < marker)
        with read_tx(self.engine) as conn:
            return [_routing(r) for r in conn.execute(query).mappings()]

    def update_routing(self, routing_id: int, changes: Mapping[str, Any]) -> Routing:
        current = self.get_routing(routing_id)
        merged = {k: changes.get(k, getattr(current, k)) for k in
                  ("top_id", "bottom_id", "pod_id", "project_id", "resource_type")}
        values = self._routing_values(merged, require_bottom=True)
        with write_tx(self.engine) as conn:
            conn.execute(schema.routings.update().where(schema.routings.c.id == routing_id).values(
                **values, updated_at=_now()))
        return self.get_routing(routing_id)

    def delete_routing(self, routing_id: int) -> None:
        with write_tx(self.engine) as conn:
            deleted = conn.execute(schema.routings.delete().where(schema.routings.c.id == routing_id)).rowcount
        if not deleted:
            raise NotFound(f"routing {routing_id} not found")

    def forget(self, top_id: str, resource_type: str, pod_id: str | None = None) -> int:
        """Drop the routings of a central resource (all pods, or one)."""
        c = schema.routings.c
        query = schema.routings.delete().where(c.top_id == top_id, c.resource_type == resource_type)
        if pod_id is not None:
            query = query.where(c.pod_id == pod_id)
        with write_tx(self.engine) as conn:
            return conn.execute(query).rowcount

    def _routing_values(self, values: Mapping[str, Any], require_bottom: bool) -> dict[str, Any]:
        pod_id = checked_text("pod_id", values.get("pod_id"), max_len=36)
        out = {
            "top_id": checked_text("top_id", values.get("top_id"), max_len=127),
            "bottom_id": checked_text("bottom_id", values.get("bottom_id"), required=require_bottom,
                                      max_len=36) or None,
            "pod_id": pod_id,
            "project_id": checked_text("project_id", values.get("project_id")),
            "resource_type": checked_text("resource_type", values.get("resource_type"), max_len=64),
        }
        if out["resource_type"] not in RESOURCE_TYPES:
            raise Invalid(f"resource_type: must be one of {', '.join(RESOURCE_TYPES)}")
        try:
            self.get_pod(pod_id)
        except NotFound as err:
            raise Invalid(f"pod_id: no pod {out['pod_id']}") from err
        return out
