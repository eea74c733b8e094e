"""The region registry: which regions (pods) Isthmus joins, their availability
zones, and where each central resource has copies (routings).

Every component reads this one registry (the Admin API writes it), from the
Isthmus database: SQLite by default, PostgreSQL/MariaDB for several hosts.
"""

from isthmus.registry.errors import Conflict, Invalid, NotFound, RegistryError, UnknownAvailabilityZone
from isthmus.registry.models import RESOURCE_TYPES, Binding, Pod, Routing
from isthmus.registry.schema import create_schema, drop_schema
from isthmus.registry.store import MAX_LIMIT, Registry, regions_for_hints
from isthmus.registry.tombstones import Tombstones
from isthmus.registry.tunnel_keys import TunnelKeys

__all__ = [
    "MAX_LIMIT", "RESOURCE_TYPES", "Binding", "Conflict", "Invalid", "NotFound", "Pod", "Registry", "RegistryError",
    "Routing", "Tombstones", "TunnelKeys", "UnknownAvailabilityZone", "create_schema", "drop_schema",
    "regions_for_hints",
]
