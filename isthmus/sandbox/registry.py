"""Isthmus' own database in the sandbox, with the regions registered as pods."""

from __future__ import annotations

from isthmus.sandbox.layout import CENTRAL_REGION, Layout


def prepare(layout: Layout) -> None:
    """Schema of the registry and the job engine; CentralRegion plus one pod per
    region (RegionOne in az1, RegionTwo in az2, ...), as an operator would
    register them through the Admin API."""
    from isthmus import jobs, registry
    from isthmus.db import make_engine

    engine = make_engine(layout.isthmus_db_url)
    try:
        registry.create_schema(engine)
        jobs.create_schema(engine)
        pods = registry.Registry(engine)
        pods.ensure_pod(CENTRAL_REGION)
        for region in layout.regions:
            pods.ensure_pod(region, layout.availability_zone(region))
    finally:
        engine.dispose()
