"""Regional copies in the routing table: one per (top id, region), the first recorded wins."""

from __future__ import annotations

import asyncio

from isthmus.db import make_engine
from isthmus.gateway.routing import Router
from isthmus.registry import Registry, create_schema


def router(tmp_path) -> Router:
    engine = make_engine(f"sqlite:///{tmp_path / 'isthmus.sqlite'}")
    create_schema(engine)
    registry = Registry(engine)
    registry.ensure_pod("CentralRegion")
    for region, az in (("RegionOne", "az1"), ("RegionTwo", "az2")):
        registry.ensure_pod(region, az)
    return Router(registry, "CentralRegion")


def test_first_recorded_copy_wins_and_is_forgotten_per_region(tmp_path):
    async def run():
        r = router(tmp_path)
        assert await r.copies("server_group", "g") == {}
        assert await r.record_copy("server_group", "g", "copy-a", "RegionTwo", "p") == "copy-a"
        # Another process made a second copy meanwhile: it learns the recorded one.
        assert await r.record_copy("server_group", "g", "copy-b", "RegionTwo", "p") == "copy-a"
        assert await r.record_copy("server_group", "g", "copy-c", "RegionOne", "p") == "copy-c"
        assert await r.copies("server_group", "g") == {"RegionTwo": "copy-a", "RegionOne": "copy-c"}
        assert await r.copies("server", "g") == {}  # kinds are apart
        assert await r.top_of("server_group", "copy-a") == "g"
        assert await r.top_of("server_group", "copy-b") is None  # the loser was never recorded
        assert await r.top_of("server", "copy-a") is None
        await r.forget_copy("server_group", "g", "RegionTwo")
        assert await r.copies("server_group", "g") == {"RegionOne": "copy-c"}
        r.close()
    asyncio.run(run())


def test_ensure_copy_numbers_are_stable(tmp_path):
    async def run():
        r = router(tmp_path)
        first = await r.ensure_copy("aggregate", "uuid-1", "1", "RegionOne")
        other = await r.ensure_copy("aggregate", "uuid-2", "1", "RegionTwo")
        assert first.id != other.id
        assert (await r.ensure_copy("aggregate", "uuid-1", "1", "RegionOne")).id == first.id
        found = await r.routing(first.id)
        assert found is not None and found.resource_type == "aggregate" and found.bottom_id == "1"
        assert await r.routing(10_000) is None
        r.close()
    asyncio.run(run())


def test_the_master_is_never_the_first_region_by_name(tmp_path):
    """Issue 26 item 7: with no master configured, registering a pod whose name
    sorts first silently moved the global objects to it. Now several regions and
    no master is a 503 naming the option, and the gateway refuses to start."""
    import pytest

    from isthmus.gateway import service
    from isthmus.gateway.faults import Fault

    async def run():
        r = router(tmp_path)
        with pytest.raises(Fault, match=r"master_region"):
            await r.master_region()
        named = Router(r.registry, "CentralRegion", "RegionTwo")
        assert await named.master_region() == "RegionTwo"
        r.close()
        named.close()
    asyncio.run(run())
    registry = router(tmp_path).registry
    with pytest.raises(service.MasterRegionMissing, match="RegionOne, RegionTwo"):
        service.require_master(registry, "CentralRegion", None)
    service.require_master(registry, "CentralRegion", "RegionTwo")


def test_rewriters_per_host_are_bounded():
    from types import SimpleNamespace

    from isthmus.gateway.forwarding import MAX_REWRITERS, Forwarder

    catalog = SimpleNamespace(endpoints_known=lambda api: [])
    fwd = Forwarder(None, catalog, None, None)  # type: ignore[arg-type]
    api = SimpleNamespace(name="compute", prefix="/compute/v2.1")
    for n in range(MAX_REWRITERS * 3):
        fwd.rewriter(SimpleNamespace(api=api, base=f"http://evil-{n}.example"))  # type: ignore[arg-type]
    assert len(fwd._rewriters) == MAX_REWRITERS


def test_new_tenants_spread_over_regions_and_skip_a_sick_one(tmp_path):
    """Issue 26 item 8: every project without an AZ bound to the first region by name."""
    async def run():
        r = router(tmp_path)
        placed = [(await r.choose(f"p{n}", None)).region_name for n in range(4)]
        assert sorted(placed) == ["RegionOne", "RegionOne", "RegionTwo", "RegionTwo"]
        assert (await r.choose("p0", None)).region_name == placed[0]  # a binding never moves
        assert (await r.choose("p-new", None, sick={"RegionOne"})).region_name == "RegionTwo"
        assert (await r.choose("p-new2", None, sick={"RegionOne", "RegionTwo"})).region_name  # all sick: still one
        r.close()
    asyncio.run(run())
