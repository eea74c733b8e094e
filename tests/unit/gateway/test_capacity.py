"""Placement by region capacity: parsing Placement's reply,
ranking regions, and the router binding a new project where there is most room."""

from __future__ import annotations

import asyncio

import pytest

from isthmus.gateway.capacity import Capacity, CapacityReader, capacity_from_candidates, rank_by_capacity
from isthmus.gateway.routing import Router
from tests.unit.gateway.test_copies import router


def summaries(*providers: tuple[int, int, int, int]) -> dict:
    """(memory capacity, memory used, vcpu capacity, vcpu used) per provider."""
    return {"allocation_requests": [], "provider_summaries": {
        f"rp-{n}": {"resources": {"MEMORY_MB": {"capacity": mc, "used": mu}, "VCPU": {"capacity": vc, "used": vu}}}
        for n, (mc, mu, vc, vu) in enumerate(providers)}}


def test_free_room_is_summed_over_providers_never_negative():
    doc = summaries((8192, 2048, 16, 4), (4096, 5000, 8, 1))  # the second over-committed
    assert capacity_from_candidates(doc) == Capacity(memory_mb=6144, vcpus=12 + 7)
    assert capacity_from_candidates({"provider_summaries": {}}) == Capacity(0, 0)
    with pytest.raises(ValueError):
        capacity_from_candidates({"provider_summaries": []})


def test_most_room_first_unknown_last_ties_by_the_tie_break():
    caps = {"R1": Capacity(1000, 4), "R2": Capacity(9000, 1), "R3": None, "R4": Capacity(1000, 8)}
    assert rank_by_capacity(["R1", "R2", "R3", "R4"], caps, lambda r: r) == ["R2", "R4", "R1", "R3"]
    equal = {"R1": Capacity(5, 5), "R2": Capacity(5, 5)}
    assert rank_by_capacity(["R1", "R2"], equal, lambda r: {"R1": 3, "R2": 0}[r]) == ["R2", "R1"]


def test_capacity_is_read_once_per_ttl_and_a_failure_is_unknown():
    now = [0.0]
    reads: list[str] = []

    def read(region: str) -> Capacity:
        reads.append(region)
        if region == "Down":
            raise ConnectionError("placement unreachable")
        return Capacity(100, 1)

    reader = CapacityReader(read, ttl=30, clock=lambda: now[0])

    async def run() -> None:
        assert await reader.of(["Up", "Down"]) == {"Up": Capacity(100, 1), "Down": None}
        assert await reader.of(["Up"]) == {"Up": Capacity(100, 1)}
        now[0] = 31
        await reader.of(["Up"])
    asyncio.run(run())
    reader.close()
    assert reads == ["Up", "Down", "Up"]


def test_a_new_project_binds_where_there_is_most_room_and_stays(tmp_path):
    room = {"RegionOne": Capacity(2048, 8), "RegionTwo": Capacity(65536, 32)}
    reader = CapacityReader(lambda region: room[region], ttl=0)
    base = router(tmp_path)
    r = Router(base.registry, "CentralRegion", capacity=reader)

    async def run() -> None:
        # Fewest projects would pick RegionOne (both empty, by name); capacity says RegionTwo.
        assert (await r.choose("p1", None)).region_name == "RegionTwo"
        assert (await r.choose("p2", None)).region_name == "RegionTwo"  # still more room there
        room["RegionTwo"] = Capacity(0, 0)
        assert (await r.choose("p1", None)).region_name == "RegionTwo"  # a binding never moves
        assert (await r.choose("p3", None)).region_name == "RegionOne"
        assert (await r.choose("p4", None, sick={"RegionOne"})).region_name == "RegionTwo"  # breaker first
    asyncio.run(run())
    r.close()
    base.close()


def test_a_gateway_for_some_regions_places_lists_and_masters_only_among_them(tmp_path) -> None:
    """``[gateway] regions``: the operator's APIGateway ``regionSelector``."""
    from isthmus.gateway.service import MasterRegionMissing, require_master

    base = router(tmp_path)
    assert len({p.region_name for p in base.registry.regional_pods()} - {"CentralRegion"}) >= 2
    one = Router(base.registry, "CentralRegion", regions=["RegionTwo"])

    async def run() -> None:
        assert await one.regions() == ["RegionTwo"]
        assert await one.master_region() == "RegionTwo"  # the one region it serves
        assert (await one.choose("p1", None)).region_name == "RegionTwo"
    asyncio.run(run())
    require_master(base.registry, "CentralRegion", None, ["RegionTwo"])  # one region behind it: no master needed
    with pytest.raises(MasterRegionMissing):
        require_master(base.registry, "CentralRegion", None)
