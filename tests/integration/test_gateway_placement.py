"""Placement by region capacity through the gateway: with
``[gateway] placement_policy = most_free_capacity`` a project's first server binds
it to the region whose Placement reports the most free room, whichever way round."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from isthmus.sandbox import gateway as sandbox_gateway
from tests.integration.helpers import sandbox_cli
from tests.integration.test_gateway import Gateway, delete_servers_named, fresh_project, name

pytestmark = [pytest.mark.integration, pytest.mark.exclusive]
PLACEMENT = {"OpenStack-API-Version": "placement 1.28"}


@pytest.fixture(scope="module")
def gw(sandbox) -> Iterator[Gateway]:
    """The sandbox's gateway, restarted with the capacity policy (and put back)."""
    gateway = Gateway(sandbox)
    override = sandbox_gateway.config_dir(gateway.layout) / "placement-policy.conf"
    override.write_text("[gateway]\nplacement_policy = most_free_capacity\ncapacity_ttl = 0\n")
    sandbox_cli(sandbox, "sandbox", "restart", "isthmus-gateway")
    try:
        yield gateway
    finally:
        delete_servers_named(gateway, "gw-")
        override.unlink()
        sandbox_cli(sandbox, "sandbox", "restart", "isthmus-gateway")


def _fill(sandbox, region: str) -> tuple[Any, str]:
    """Allocate all but 1 MB of every compute provider's free memory in ``region``
    to a consumer of our own (Nova leaves allocations it does not know alone)."""
    placement = sandbox.connect(region, cloud="isthmus-admin").placement
    reply = placement.get("/allocation_candidates?resources=MEMORY_MB:1", headers=PLACEMENT)
    assert reply.status_code == 200, reply.text
    resources = {rp: summary["resources"]["MEMORY_MB"] for rp, summary in reply.json()["provider_summaries"].items()}
    take = {rp: {"resources": {"MEMORY_MB": r["capacity"] - r["used"] - 1}}
            for rp, r in resources.items() if r["capacity"] - r["used"] > 1}
    assert take, f"{region}: no free memory to take"
    consumer = str(uuid.uuid4())
    body = {"allocations": take, "project_id": str(uuid.uuid4()), "user_id": str(uuid.uuid4()),
            "consumer_generation": None}
    put = placement.put(f"/allocations/{consumer}", json=body, headers=PLACEMENT)
    assert put.status_code == 204, put.text
    return placement, consumer


@pytest.mark.parametrize("full", [0, 1], ids=["RegionOne-full", "RegionTwo-full"])
def test_a_new_project_binds_to_the_region_with_the_most_free_room(sandbox, gw, full):
    """Each way round, so that no order by name or by bound projects can pass it."""
    filled = sandbox.regions[full]
    roomy = sandbox.regions[1 - full]
    placement, consumer = _fill(sandbox, filled)
    try:
        with fresh_project(gw, instances=2) as token:
            resp = gw.boot(name(), token=token)
            assert resp.status_code == 202, resp.text
            assert gw.region_of(resp.json()["server"]["id"]) == roomy
    finally:
        assert placement.delete(f"/allocations/{consumer}", headers=PLACEMENT).status_code == 204
