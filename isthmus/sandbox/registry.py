"""Isthmus' own database in the sandbox, with the regions registered as pods."""

from __future__ import annotations

from isthmus.sandbox import process, runtime
from isthmus.sandbox.layout import CENTRAL_REGION, Layout
from isthmus.sandbox.schema_cache import SchemaCache, provide_sqlite


def prepare(layout: Layout, cache: SchemaCache | None = None) -> None:
    """``isthmus db upgrade`` (as an operator runs it), then CentralRegion plus one
    pod per region (RegionOne in az1, RegionTwo in az2, ...), as an operator would
    register them through the Admin API."""
    from isthmus import registry
    from isthmus.db import make_engine

    provide_sqlite(cache or SchemaCache(None), "isthmus", "isthmus.sqlite", layout.sqlite_path("isthmus"),
                   lambda: process.run([runtime.tool("isthmus"), "db", "upgrade", "--db-url", layout.isthmus_db_url],
                                       layout.logs / "isthmus-db.log", what="isthmus db upgrade"))
    engine = make_engine(layout.isthmus_db_url)
    try:
        pods = registry.Registry(engine)
        pods.ensure_pod(CENTRAL_REGION)
        for region in layout.regions:
            pods.ensure_pod(region, layout.availability_zone(region))
    finally:
        engine.dispose()
