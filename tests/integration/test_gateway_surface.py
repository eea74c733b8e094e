"""isthmus-gateway: server groups in every region, volume attachments, aggregates
and quota sets on the sandbox, through CentralRegion."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.integration.helpers import eventually, merged_equals_direct
from tests.integration.test_gateway import NONE_NET, cli, delete_servers_named
from tests.integration.test_gateway import name as gateway_name
from tests.integration.test_gateway_volumes import Volumes

pytestmark = pytest.mark.integration


def name() -> str:
    return gateway_name("gs")
GROUPS_V = {"OpenStack-API-Version": "compute 2.64"}


@pytest.fixture(scope="module")
def sg(sandbox):
    gateway = Volumes(sandbox)
    yield gateway
    delete_servers_named(gateway, "gs-")
    for cloud in ("isthmus-demo", "isthmus-admin"):
        for group in gateway.call("GET", "/os-server-groups", cloud).json().get("server_groups", []):
            if group["name"].startswith("gs-"):
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
    # A server shows the gateway's group id (2.71), in every region.
    for sid in members.values():
        own = sg.call("GET", f"/servers/{sid}", headers={"OpenStack-API-Version": "compute 2.71"})
        assert own.json()["server"]["server_groups"] == [gid]

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
    # A copy deleted in its region behind the gateway's back is made again on the next boot.
    (old,) = [r.bottom_id for r in sg.registry().routings_of(gid, "server_group")]
    sg.sandbox.connect(regions[1], cloud="isthmus-admin").compute.delete_server_group(old)
    third = boot_in_group(sg, sg.layout.availability_zone(regions[1]), gid)
    assert third.status_code == 202 and settled(sg, third.json()["server"]["id"]) == "ACTIVE", third.text
    (new,) = [r.bottom_id for r in sg.registry().routings_of(gid, "server_group")]
    assert new != old and third.json()["server"]["id"] in sg.call("GET", f"/os-server-groups/{gid}").json()[
        "server_group"]["members"]


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


# --- 9: volume attachments --------------------------------------------------------------------

ATTACH_V = {"OpenStack-API-Version": "volume 3.27"}


def test_attach_list_show_swap_detach_in_a_non_master_region(sg):
    from isthmus.sandbox.gateway import master_region

    region = next(r for r in sg.sandbox.regions if r != master_region(sg.layout))
    elsewhere = master_region(sg.layout)
    az, other_az = sg.layout.availability_zone(region), sg.layout.availability_zone(elsewhere)
    sid = sg.boot(name(), az=az).json()["server"]["id"]
    volume, spare, foreign = sg.create_volume(az), sg.create_volume(az), sg.create_volume(other_az)
    sg.wait(sid)
    for v in (volume, spare, foreign):
        sg.wait_volume(v["id"])
    attachments = f"/servers/{sid}/os-volume_attachments"
    bad = sg.call("POST", attachments, json={"volumeAttachment": {"volumeId": 7}})
    assert bad.status_code == 400 and "volumeId" in bad.text
    refused = sg.call("POST", attachments, json={"volumeAttachment": {"volumeId": foreign["id"]}})
    assert refused.status_code == 400 and "same region" in refused.json()["badRequest"]["message"]
    made = sg.call("POST", attachments, json={"volumeAttachment": {"volumeId": volume["id"]}})
    assert made.status_code == 200, made.text
    assert made.json()["volumeAttachment"]["volumeId"] == volume["id"]
    in_use = sg.wait_volume(volume["id"], "in-use")
    assert [a["server_id"] for a in in_use["attachments"]] == [sid]

    listed = sg.call("GET", attachments)
    assert listed.status_code == 200 and [a["volumeId"] for a in listed.json()["volumeAttachments"]] == [volume["id"]]
    shown = sg.call("GET", f"{attachments}/{volume['id']}")
    assert shown.status_code == 200 and shown.json()["volumeAttachment"]["serverId"] == sid
    # Swap to a volume of another region: refused before the region is asked.
    swap = sg.call("PUT", f"{attachments}/{volume['id']}", "isthmus-admin",
                   json={"volumeAttachment": {"volumeId": foreign["id"]}})
    assert swap.status_code == 400 and "same region" in swap.text
    # Cinder's attachments (3.27): the one Nova made is found and listed through the gateway.
    cinder = sg.vcall("GET", "/attachments", headers=ATTACH_V)
    assert cinder.status_code == 200, cinder.text
    (att,) = [a for a in cinder.json()["attachments"] if a["volume_id"] == volume["id"]]
    assert att["instance"] == sid
    assert sg.vcall("GET", f"/attachments/{att['id']}", headers=ATTACH_V).json()["attachment"]["instance"] == sid

    detach = sg.call("DELETE", f"{attachments}/{volume['id']}")
    assert detach.status_code == 202, detach.text
    sg.wait_volume(volume["id"], "available")
    assert sg.call("GET", attachments).json()["volumeAttachments"] == []
    sg.call("DELETE", f"/servers/{sid}")
    for v in (volume, spare, foreign):
        sg.vcall("DELETE", f"/volumes/{v['id']}")


def test_cinder_attachment_create_needs_server_and_volume_in_one_region(sg):
    from isthmus.sandbox.gateway import master_region

    region = next(r for r in sg.sandbox.regions if r != master_region(sg.layout))
    az, other_az = sg.layout.availability_zone(region), sg.layout.availability_zone(master_region(sg.layout))
    sid = sg.boot(name(), az=az).json()["server"]["id"]
    local, foreign = sg.create_volume(az), sg.create_volume(other_az)
    sg.wait(sid)
    sg.wait_volume(local["id"])
    sg.wait_volume(foreign["id"])
    bad = sg.vcall("POST", "/attachments", headers=ATTACH_V, json={"attachment": {"volume_uuid": ["x"]}})
    assert bad.status_code == 400 and "attachment.volume_uuid" in bad.text
    refused = sg.vcall("POST", "/attachments", headers=ATTACH_V,
                       json={"attachment": {"volume_uuid": foreign["id"], "instance_uuid": sid}})
    assert refused.status_code == 400 and "same region" in refused.text
    unknown = sg.vcall("POST", "/attachments", headers=ATTACH_V,
                       json={"attachment": {"volume_uuid": str(uuid.uuid4()), "instance_uuid": sid}})
    assert unknown.status_code == 404
    made = sg.vcall("POST", "/attachments", headers=ATTACH_V,
                    json={"attachment": {"volume_uuid": local["id"], "instance_uuid": sid}})
    assert made.status_code == 200, made.text
    att = made.json()["attachment"]
    assert sg.wait_volume(local["id"], "reserved")["id"] == local["id"]
    assert sg.vcall("GET", f"/attachments/{att['id']}", headers=ATTACH_V).status_code == 200
    assert sg.vcall("GET", f"/attachments/{uuid.uuid4()}", headers=ATTACH_V).status_code == 404
    assert sg.vcall("DELETE", f"/attachments/{att['id']}", headers=ATTACH_V).status_code == 200
    sg.wait_volume(local["id"], "available")
    sg.call("DELETE", f"/servers/{sid}")
    for v in (local, foreign):
        sg.vcall("DELETE", f"/volumes/{v['id']}")


# --- 10: aggregates, quota sets, limits -------------------------------------------------------

def test_aggregates_merged_read_only_admin_view(sg):
    made = {}
    for region in sg.sandbox.regions:
        conn = sg.sandbox.connect(region, cloud="isthmus-admin")
        made[region] = conn.compute.create_aggregate(name=f"gs-{region}-{uuid.uuid4().hex[:4]}")
    try:
        listed = sg.call("GET", "/os-aggregates", "isthmus-admin")
        assert listed.status_code == 200, listed.text
        by_name = {a["name"]: a for a in listed.json()["aggregates"]}
        ours = [by_name[a.name] for a in made.values()]
        assert len({a["id"] for a in listed.json()["aggregates"]}) == len(listed.json()["aggregates"])
        for regional in made.values():
            number = by_name[regional.name]["id"]
            shown = sg.call("GET", f"/os-aggregates/{number}", "isthmus-admin")
            assert shown.status_code == 200 and shown.json()["aggregate"]["name"] == regional.name
            assert shown.json()["aggregate"]["id"] == number
        uuids = sg.call("GET", "/os-aggregates", "isthmus-admin", headers={"OpenStack-API-Version": "compute 2.41"})
        # Regional ids collide (each region numbers from 1); the uuids show which is which.
        assert {a.uuid for a in made.values()} == {a["uuid"] for a in uuids.json()["aggregates"]
                                                   if a["name"] in {r.name for r in made.values()}}
        assert len(ours) == len(sg.sandbox.regions)
        # A non-admin gets Nova's 403, for lists, shows and writes alike.
        for method, path in (("GET", "/os-aggregates"), ("GET", f"/os-aggregates/{ours[0]['id']}"),
                             ("GET", "/os-aggregates/999999999"), ("POST", "/os-aggregates")):
            denied = sg.call(method, path, json={"aggregate": {"name": "x"}} if method == "POST" else None)
            assert denied.status_code == 403 and "forbidden" in denied.json(), (method, path, denied.text)
        # Read-only for an admin too; malformed and unknown ids.
        write = sg.call("POST", "/os-aggregates", "isthmus-admin", json={"aggregate": {"name": name()}})
        assert write.status_code == 405
        assert sg.call("GET", "/os-aggregates/abc", "isthmus-admin").status_code == 400
        assert sg.call("GET", "/os-aggregates/999999999", "isthmus-admin").status_code == 404
        for region in sg.sandbox.regions:
            names = [a.name for a in sg.sandbox.connect(region, cloud="isthmus-admin").compute.aggregates()]
            assert not [n for n in names if n.startswith("gs-") and n not in {a.name for a in made.values()}]
    finally:
        for region, aggregate in made.items():
            sg.sandbox.connect(region, cloud="isthmus-admin").compute.delete_aggregate(aggregate)


def test_quota_defaults_user_quotas_and_limits_of_a_tenant(sg):
    from isthmus.sandbox.gateway import master_region

    project = sg.project()
    user = sg.conns["isthmus-demo"].current_user_id
    master = sg.sandbox.connect(master_region(sg.layout), cloud="isthmus-admin")
    others = [r for r in sg.sandbox.regions if r != master_region(sg.layout)]

    def regional_user_quota(region: str) -> int:
        conn = sg.sandbox.connect(region, cloud="isthmus-admin")
        return conn.compute.get(f"/os-quota-sets/{project}?user_id={user}").json()["quota_set"]["key_pairs"]

    defaults = sg.call("GET", f"/os-quota-sets/{project}/defaults")
    assert defaults.status_code == 200, defaults.text
    direct = master.compute.get(f"/os-quota-sets/{project}/defaults").json()["quota_set"]
    assert defaults.json()["quota_set"] == direct

    path = f"/os-quota-sets/{project}?user_id={user}"
    put = sg.call("PUT", path, "isthmus-admin", json={"quota_set": {"key_pairs": 77}})
    assert put.status_code == 200 and put.json()["quota_set"]["key_pairs"] == 77, put.text
    try:
        assert sg.call("GET", path, "isthmus-admin").json()["quota_set"]["key_pairs"] == 77
        assert sg.call("GET", f"/os-quota-sets/{project}", "isthmus-admin").json()["quota_set"]["key_pairs"] != 77
        detail = sg.call("GET", f"/os-quota-sets/{project}/detail?user_id={user}", "isthmus-admin")
        assert detail.status_code == 200 and detail.json()["quota_set"]["key_pairs"]["limit"] == 77
        assert sg.call("PUT", path, json={"quota_set": {"key_pairs": 78}}).status_code == 403
        bad = sg.call("PUT", path, "isthmus-admin", json={"quota_set": {"key_pairs": "many"}})
        assert bad.status_code == 400 and "key_pairs" in bad.text
        odd = sg.call("GET", f"/os-quota-sets/{project}?user_id=a/b", "isthmus-admin")
        assert odd.status_code == 400 and "user_id" in odd.json()["badRequest"]["message"]
        # The user's limits reach every region (the job), so each region's Nova holds them too.
        for region in others:
            eventually(lambda r=region: regional_user_quota(r) == 77, what=f"user quota in {region}")
    finally:
        assert sg.call("DELETE", path, "isthmus-admin").status_code == 202
    assert sg.call("GET", path, "isthmus-admin").json()["quota_set"]["key_pairs"] != 77
    for region in others:
        eventually(lambda r=region: regional_user_quota(r) != 77, what=f"user quota gone in {region}")

    # /limits?tenant_id: an admin reads the demo project's limits, usage summed over regions.
    sid = sg.boot(name(), az=sg.layout.availability_zone(sg.sandbox.regions[-1])).json()["server"]["id"]
    sg.wait(sid)

    def regions_used() -> int:
        return sum(sg.sandbox.connect(r, cloud="isthmus-admin").compute.get(f"/limits?tenant_id={project}")
                   .json()["limits"]["absolute"]["totalInstancesUsed"] for r in sg.sandbox.regions)

    def gateway_used() -> int:
        limits = sg.call("GET", f"/limits?tenant_id={project}", "isthmus-admin")
        assert limits.status_code == 200, limits.text
        return limits.json()["limits"]["absolute"]["totalInstancesUsed"]

    used = merged_equals_direct(regions_used, gateway_used, minimum=1, what="instances used via the gateway")
    own = sg.call("GET", "/limits", "isthmus-admin").json()["limits"]["absolute"]["totalInstancesUsed"]
    assert own != used or own == 0
    sg.call("DELETE", f"/servers/{sid}")


@pytest.mark.exclusive
def test_cinder_quota_usage_sums_over_regions_and_defaults_are_the_masters(sg):
    from isthmus.sandbox.gateway import master_region

    project = sg.project()
    made = [sg.create_volume(az=sg.layout.availability_zone(r)) for r in sg.sandbox.regions]
    for volume in made:
        sg.wait_volume(volume["id"])
    try:
        path = f"/os-quota-sets/{project}?usage=True"
        direct = sum(sg.sandbox.connect(r).block_storage.get(path).json()["quota_set"]["volumes"]["in_use"]
                     for r in sg.sandbox.regions)
        merged = sg.vcall("GET", path)
        assert merged.status_code == 200, merged.text
        assert merged.json()["quota_set"]["volumes"]["in_use"] == direct >= len(made)
        assert isinstance(sg.vcall("GET", f"/os-quota-sets/{project}").json()["quota_set"]["volumes"], int)
        defaults = sg.vcall("GET", f"/os-quota-sets/{project}/defaults")
        master = sg.sandbox.connect(master_region(sg.layout)).block_storage
        assert defaults.status_code == 200
        assert defaults.json()["quota_set"] == master.get(f"/os-quota-sets/{project}/defaults").json()["quota_set"]
    finally:
        for volume in made:
            sg.vcall("DELETE", f"/volumes/{volume['id']}")
