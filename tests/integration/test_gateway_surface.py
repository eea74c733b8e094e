"""isthmus-gateway: server groups in every region, volume attachments, aggregates
and quota sets (issue 9, items 8-10) on the sandbox, through CentralRegion."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.integration.test_gateway import NONE_NET, cli, name
from tests.integration.test_gateway_volumes import Volumes

pytestmark = pytest.mark.integration
GROUPS_V = {"OpenStack-API-Version": "compute 2.64"}


@pytest.fixture(scope="module")
def sg(sandbox):
    gateway = Volumes(sandbox)
    yield gateway
    for cloud in ("isthmus-demo", "isthmus-admin"):
        for server in gateway.call("GET", "/servers", cloud).json().get("servers", []):
            if server["name"].startswith("gw-"):
                gateway.call("DELETE", f"/servers/{server['id']}", cloud)
        for group in gateway.call("GET", "/os-server-groups", cloud).json().get("server_groups", []):
            if group["name"].startswith("gw-"):
                gateway.call("DELETE", f"/os-server-groups/{group['id']}", cloud)


def boot_in_group(gw, az: str, group_id: str, cloud: str = "isthmus-demo", hints_key: str = "os:scheduler_hints"):
    server = {"name": name(), "imageRef": gw.image, "flavorRef": gw.flavor, "networks": "none",
              "availability_zone": az}
    return gw.call("POST", "/servers", cloud, headers=NONE_NET,
                   json={"server": server, hints_key: {"group": group_id}})


def settled(gw, server_id: str, cloud: str = "isthmus-demo", timeout: float = 180) -> str:
    """ACTIVE or ERROR (the scheduler's verdict)."""
    deadline = time.monotonic() + timeout
    while True:
        resp = gw.call("GET", f"/servers/{server_id}", cloud)
        if resp.status_code == 200 and resp.json()["server"]["status"] in ("ACTIVE", "ERROR"):
            return resp.json()["server"]["status"]
        assert time.monotonic() < deadline, f"{server_id} still {resp.text[:200]}"
        time.sleep(1)


def make_group(gw, policy: str, cloud: str = "isthmus-demo") -> str:
    resp = gw.call("POST", "/os-server-groups", cloud, headers=GROUPS_V,
                   json={"server_group": {"name": name(), "policy": policy}})
    assert resp.status_code == 200, resp.text
    return resp.json()["server_group"]["id"]


# --- 8: server groups -------------------------------------------------------------------------

def test_server_group_hint_works_in_every_region_and_policy_holds_in_each(sg):
    from isthmus.sandbox.gateway import master_region

    made = json.loads(cli(sg.sandbox, "server", "group", "create", "--policy", "anti-affinity", name(),
                          "-f", "json").stdout)
    gid = made["id"]
    master = master_region(sg.layout)
    members = {}
    for region in sg.sandbox.regions:
        resp = boot_in_group(sg, sg.layout.availability_zone(region), gid)
        assert resp.status_code == 202, f"{region}: {resp.text}"
        members[region] = resp.json()["server"]["id"]
    for region, sid in members.items():
        assert settled(sg, sid) == "ACTIVE", region
        assert sg.region_of(sid) == region
    # Each region has one compute host: a second member in a region breaks anti-affinity there.
    other = next(r for r in sg.sandbox.regions if r != master)
    second = boot_in_group(sg, sg.layout.availability_zone(other), gid, hints_key="OS-SCH-HNT:scheduler_hints")
    assert second.status_code == 202, second.text
    assert settled(sg, second.json()["server"]["id"]) == "ERROR"

    copies = {r.pod_id: r.bottom_id for r in sg.registry().routings_of(gid, "server_group")}
    assert len(copies) == len(sg.sandbox.regions) - 1 and gid not in copies.values()
    (copy_id,) = copies.values()
    regional = sg.sandbox.connect(other).compute.get_server_group(copy_id)
    assert regional.policy == "anti-affinity" and members[other] in regional.member_ids

    shown = json.loads(cli(sg.sandbox, "server", "group", "show", gid, "-f", "json").stdout)
    assert set(members.values()) <= set(shown["members"].split(", ") if isinstance(shown["members"], str)
                                        else shown["members"])
    listed = next(g for g in sg.call("GET", "/os-server-groups").json()["server_groups"] if g["id"] == gid)
    assert set(members.values()) <= set(listed["members"])
    assert copy_id not in {g["id"] for g in sg.call("GET", "/os-server-groups").json()["server_groups"]}

    for sid in [*members.values(), second.json()["server"]["id"]]:
        sg.call("DELETE", f"/servers/{sid}")
    cli(sg.sandbox, "server", "group", "delete", gid)
    assert sg.call("GET", f"/os-server-groups/{gid}").status_code == 404
    assert sg.registry().routings_of(gid, "server_group") == []
    assert sg.sandbox.connect(other).compute.find_server_group(copy_id, ignore_missing=True) is None


def test_affinity_group_keeps_to_one_region(sg):
    gid = make_group(sg, "affinity")
    regions = sg.sandbox.regions
    first = boot_in_group(sg, sg.layout.availability_zone(regions[1]), gid)
    assert first.status_code == 202, first.text
    assert settled(sg, first.json()["server"]["id"]) == "ACTIVE"
    refused = boot_in_group(sg, sg.layout.availability_zone(regions[0]), gid)
    assert refused.status_code == 409 and regions[1] in refused.json()["conflictingRequest"]["message"]
    again = boot_in_group(sg, sg.layout.availability_zone(regions[1]), gid)
    assert again.status_code == 202 and settled(sg, again.json()["server"]["id"]) == "ACTIVE"


def test_group_hint_malformed_is_400_and_foreign_groups_are_not_touched(sg):
    from isthmus.sandbox.gateway import master_region

    other = next(r for r in sg.sandbox.regions if r != master_region(sg.layout))
    az = sg.layout.availability_zone(other)
    bad = sg.call("POST", "/servers", headers=NONE_NET, json={
        "server": {"name": name(), "imageRef": sg.image, "flavorRef": sg.flavor, "networks": "none"},
        "os:scheduler_hints": {"group": 42}})
    assert bad.status_code == 400 and "os:scheduler_hints.group" in bad.json()["badRequest"]["message"]
    # The admin project's group, with a copy in the other region.
    gid = make_group(sg, "anti-affinity", "isthmus-admin")
    booted = boot_in_group(sg, az, gid, cloud="isthmus-admin")
    assert booted.status_code == 202, booted.text
    copies = sg.registry().routings_of(gid, "server_group")
    assert len(copies) == 1
    # The demo project can neither use, read nor delete it, and its copy stays.
    assert boot_in_group(sg, az, gid).status_code in (400, 404)
    assert sg.call("GET", f"/os-server-groups/{gid}").status_code == 404
    assert sg.call("DELETE", f"/os-server-groups/{gid}").status_code == 404
    assert sg.registry().routings_of(gid, "server_group") == copies
    assert sg.sandbox.connect(other, cloud="isthmus-admin").compute.get_server_group(copies[0].bottom_id)
    sg.call("DELETE", f"/servers/{booted.json()['server']['id']}", "isthmus-admin")
    assert sg.call("DELETE", f"/os-server-groups/{gid}", "isthmus-admin").status_code == 204
    assert sg.registry().routings_of(gid, "server_group") == []
