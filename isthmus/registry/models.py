"""Records of the region registry: pods (regions and their AZs) and routings."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# What a routing may map (top = central object, bottom = its copy in a region).
RESOURCE_TYPES = (
    "network", "subnet", "port", "security_group", "router", "shadow_port",
    "floatingip", "trunk", "qos_policy",
    # The gateway's id -> region table (top id == bottom id).
    "server", "volume", "snapshot", "backup",
    # The gateway's per-region copies: a server group's copy (top = the master's
    # group id) and an aggregate's number in the merged view (top = its uuid).
    "server_group", "aggregate",
    # What router_sync adds: a router's transit network (central pod) and each
    # half's port on it (the half's pod; bottom = the central port).
    "transit_network", "transit_port",
)


@dataclass(frozen=True)
class Pod:
    """One OpenStack region joined by Isthmus.

    ``az_name`` groups regions into availability zones; the central pod (the region
    that runs central Neutron) has ``az_name == ""``, and exactly one may exist."""

    pod_id: str
    region_name: str
    az_name: str = ""
    pod_az_name: str = ""
    dc_name: str = ""

    @property
    def is_central(self) -> bool:
        return self.az_name == ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Routing:
    """Where a central resource has a copy: ``bottom_id`` in pod ``pod_id``.

    ``bottom_id`` is None while the copy is being created (a claim, see
    :meth:`Registry.claim_routing`)."""

    id: int
    top_id: str
    bottom_id: str | None
    pod_id: str
    project_id: str
    resource_type: str
    created_at: datetime
    updated_at: datetime

    def to_dict(self) -> dict[str, Any]:
        record = dataclasses.asdict(self)
        record["created_at"] = self.created_at.isoformat()
        record["updated_at"] = self.updated_at.isoformat()
        return record


@dataclass(frozen=True)
class Binding:
    """Project ``project_id`` places new servers/volumes in pod ``pod_id`` (gateway)."""

    id: int
    project_id: str
    pod_id: str
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "project_id": self.project_id, "pod_id": self.pod_id,
                "created_at": self.created_at.isoformat()}
