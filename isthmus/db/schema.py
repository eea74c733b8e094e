"""Every table of the Isthmus database, for migrations and the drift check.

Each component keeps its tables beside its code (``registry/schema.py``,
``jobs/schema.py``); this is the one list Alembic compares them against. A new
component's tables are added here together with their migration.
"""

from __future__ import annotations

import sqlalchemy as sa


def metadatas() -> list[sa.MetaData]:
    from isthmus.gateway import schema as gateway_schema
    from isthmus.jobs import schema as jobs_schema
    from isthmus.registry import schema as registry_schema

    return [registry_schema.metadata, jobs_schema.metadata, gateway_schema.metadata]


def table_names() -> set[str]:
    return {name for md in metadatas() for name in md.tables}
