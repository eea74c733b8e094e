"""isthmus-gateway's Cinder v3 on the sandbox."""

from __future__ import annotations

import json
import time
import urllib.parse
import uuid

import pytest
import requests

from tests.integration.helpers import merged_equals_direct
from tests.integration.test_gateway import Gateway, cli, delete_servers_named
from tests.integration.test_gateway import name as gateway_name

pytestmark = pytest.mark.integration


def name() -> str:
    return gateway_name("gv")


class Volumes(Gateway):
    def __init__(self, sandbox) -> None:
        super().__init__(sandbox)
        self.volume = self.url + "/volume/v3"

    def vcall(self, method: str, path: str, cloud: str = "isthmus-demo", **kw) -> requests.Response:
        return self.call(method, self.volume + path, cloud, **kw)

    def create_volume(self, az: str | None = None, size: int = 1, cloud: str = "isthmus-demo", **extra) -> dict:
        body = {"size": size, "name": extra.pop("name", name()), **extra}
        if az:
            body["availability_zone"] = az
        resp = self.vcall("POST", "/volumes", cloud, json={"volume": body})
        assert resp.status_code == 202, resp.text
        return resp.json()["volume"]

    def wait_volume(self, volume_id: str, status: str = "available", timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            resp = self.vcall("GET", f"/volumes/{volume_id}")
            if resp.status_code == 200 and resp.json()["volume"]["status"] == status:
                return resp.json()["volume"]
            assert time.monotonic() < deadline, f"volume {volume_id} not {status}: {resp.text[:300]}"
            time.sleep(1)

    def volume_region(self, volume_id: str) -> str | None:
        for region in self.sandbox.regions:
            conn = self.sandbox.connect(region, cloud="isthmus-admin")
            if conn.block_storage.find_volume(volume_id, ignore_missing=True, all_projects=True):
                return region
        return None


@pytest.fixture(scope="module")
def vg(sandbox):
    gateway = Volumes(sandbox)
    yield gateway
    delete_servers_named(gateway, "gv-")
    for volume in gateway.vcall("GET", "/volumes").json().get("volumes", []):
        if volume["name"] and volume["name"].startswith("gv-"):
            gateway.vcall("DELETE", f"/volumes/{volume['id']}")


def test_volume_versions_and_catalog(vg):
    resp = requests.get(vg.url + "/volume/", timeout=30)
    assert resp.status_code == 300 and resp.json()["versions"][0]["id"] == "v3.0"  # Cinder's Multiple Choices
    assert requests.post(vg.url + "/volume/", timeout=30).status_code == 405
    ident = vg.conns["isthmus-admin"].identity
    types = {s.id: s.type for s in ident.services()}
    for service_type in ("block-storage", "volumev3"):
        central = [e.url for e in ident.endpoints(interface="public")
                   if types[e.service_id] == service_type and e.region_id == "CentralRegion"]
        assert central == [vg.volume]


def test_09_cli_volume_create_in_az(vg):
    out = json.loads(cli(vg.sandbox, "volume", "create", "--size", "1", "--availability-zone", "az2", name(),
                         "-f", "json").stdout)
    assert out["availability_zone"] == "az2"
    assert vg.volume_region(out["id"]) == "RegionTwo"
    shown = vg.wait_volume(out["id"])
    assert shown["availability_zone"] == "az2"
    assert vg.vcall("POST", "/volumes", json={"volume": {"size": 1, "availability_zone": "nope"}}).status_code == 400


def test_16_attach_same_region_only_then_detach(vg):
    sid = vg.boot(name(), az="az1").json()["server"]["id"]
    vg.wait(sid)
    other = vg.create_volume("az2")
    local = vg.create_volume("az1")
    vg.wait_volume(other["id"])
    vg.wait_volume(local["id"])
    refused = vg.call("POST", f"/servers/{sid}/os-volume_attachments",
                      json={"volumeAttachment": {"volumeId": other["id"]}})
    assert refused.status_code == 400 and "same region" in refused.text
    server_name = vg.call("GET", f"/servers/{sid}").json()["server"]["name"]
    cli(vg.sandbox, "server", "add", "volume", server_name, local["id"])
    vg.wait_volume(local["id"], "in-use")
    detach = vg.call("DELETE", f"/servers/{sid}/os-volume_attachments/{local['id']}")
    assert detach.status_code == 202
    vg.wait_volume(local["id"], "available")


def test_17_extend(vg):
    volume = vg.create_volume("az2")
    vg.wait_volume(volume["id"])
    assert vg.vcall("POST", f"/volumes/{volume['id']}/action", json={"os-extend": {"new_size": "x"}}).status_code == 400
    assert vg.vcall("POST", f"/volumes/{volume['id']}/action", json={"os-extend": {"new_size": 2}}).status_code == 202
    deadline = time.monotonic() + 60
    while vg.wait_volume(volume["id"])["size"] != 2:
        assert time.monotonic() < deadline
        time.sleep(1)


def test_18_delete_then_routing_collected(vg):
    volume = vg.create_volume("az1")
    vg.wait_volume(volume["id"])
    assert vg.vcall("DELETE", f"/volumes/{volume['id']}").status_code == 202
    deadline = time.monotonic() + 60
    while vg.vcall("GET", f"/volumes/{volume['id']}").status_code != 404:
        assert time.monotonic() < deadline
        time.sleep(1)
    assert vg.registry().routings_of(volume["id"], "volume") == []


def test_20_21_az_filter_and_pagination_sorted_by_name(vg):
    tag = name()
    made = {az: [vg.create_volume(az, name=f"{tag}-{az}-{i}")["id"] for i in range(3)] for az in ("az1", "az2")}
    az2 = [v for v in vg.vcall("GET", "/volumes/detail?availability_zone=az2").json()["volumes"]
           if v["name"].startswith(tag)]
    assert sorted(v["id"] for v in az2) == sorted(made["az2"])
    assert {v["availability_zone"] for v in az2} == {"az2"}
    everything = [v for v in vg.vcall("GET", "/volumes/detail?sort=name:asc").json()["volumes"]]
    names = [v["name"] or "" for v in everything]
    assert names == sorted(names)
    url, seen = vg.volume + "/volumes/detail?sort=name:asc&limit=2", []
    while url:
        page = vg.call("GET", url).json()
        seen += [v["id"] for v in page["volumes"]]
        nxt = [link["href"] for link in page.get("volumes_links", []) if link["rel"] == "next"]
        if nxt:
            assert nxt[0].startswith(vg.volume + "/volumes/detail?")
        url = nxt[0] if nxt else None
    assert seen == [v["id"] for v in everything]


def test_26_volume_types_are_global(vg):
    type_name = name()
    body = {"volume_type": {"name": type_name, "extra_specs": {"volume_backend_name": "fake"}}}
    assert vg.vcall("POST", "/types", json=body).status_code == 403
    created = vg.vcall("POST", "/types", "isthmus-admin", json=body)
    assert created.status_code == 200, created.text
    assert vg.vcall("POST", "/types", "isthmus-admin", json=body).status_code == 409
    for az in ("az1", "az2"):
        volume = vg.create_volume(az, volume_type=type_name)
        assert vg.wait_volume(volume["id"])["volume_type"] == type_name
    listed = [t for t in vg.vcall("GET", "/types").json()["volume_types"] if t["name"] == type_name]
    assert len(listed) == 1 and not listed[0].get("extra_specs")  # non-admins see no extra specs


@pytest.mark.exclusive
def test_22_volumes_listed_with_a_region_down(vg):
    from isthmus.sandbox import cinder, process, runtime

    volume = vg.create_volume("az2")
    vg.wait_volume(volume["id"])
    (record,) = [r for r in process.ServiceRecord.load_all(vg.layout.run) if r.name == "cinder-api-RegionTwo"]
    process.stop(record)
    try:
        resp = vg.vcall("GET", "/volumes/detail")
        assert resp.status_code == 200
        assert volume["id"] not in [v["id"] for v in resp.json()["volumes"]]
        assert vg.vcall("GET", f"/volumes/{volume['id']}").status_code == 503
    finally:
        runtime.wait_http(cinder.start_api(vg.layout, "RegionTwo"))
    vg.wait_volume(volume["id"])


def test_snapshots_follow_their_volume(vg):
    volume = vg.create_volume("az2")
    vg.wait_volume(volume["id"])
    resp = vg.vcall("POST", "/snapshots", json={"snapshot": {"volume_id": volume["id"], "name": name()}})
    assert resp.status_code == 202, resp.text
    snap = resp.json()["snapshot"]
    shown = vg.vcall("GET", f"/snapshots/{snap['id']}")
    assert shown.status_code == 200 and shown.json()["snapshot"]["volume_id"] == volume["id"]
    assert snap["id"] in [s["id"] for s in vg.vcall("GET", "/snapshots/detail").json()["snapshots"]]
    two = vg.sandbox.connect("RegionTwo")
    assert two.block_storage.get_snapshot(snap["id"]).volume_id == volume["id"]
    unknown = vg.vcall("POST", "/snapshots", json={"snapshot": {"volume_id": str(uuid.uuid4())}})
    assert unknown.status_code == 404
    deadline = time.monotonic() + 60
    while vg.vcall("GET", f"/snapshots/{snap['id']}").json()["snapshot"]["status"] != "available":
        assert time.monotonic() < deadline
        time.sleep(1)
    assert vg.vcall("DELETE", f"/snapshots/{snap['id']}").status_code == 202


@pytest.mark.exclusive
def test_29_volume_quota_counts_every_region(vg):
    project = vg.project()
    in_use = 0
    for region in vg.sandbox.regions:
        in_use += len(list(vg.sandbox.connect(region).block_storage.volumes()))
    put = vg.vcall("PUT", f"/os-quota-sets/{project}", "isthmus-admin", json={"quota_set": {"volumes": in_use}})
    assert put.status_code == 200, put.text
    try:
        refused = vg.vcall("POST", "/volumes", json={"volume": {"size": 1, "availability_zone": "az2"}})
        assert refused.status_code == 413 and "overLimit" in refused.json()
    finally:
        vg.vcall("PUT", f"/os-quota-sets/{project}", "isthmus-admin", json={"quota_set": {"volumes": -1}})


def test_volume_limits_sum_usage_over_regions(vg):
    """Cinder's /limits through the gateway: the master's limits, usage summed over regions."""
    made = [vg.create_volume(az=vg.layout.availability_zone(r)) for r in vg.sandbox.regions]
    for volume in made:
        vg.wait_volume(volume["id"])

    def direct() -> int:
        return sum(vg.sandbox.connect(r).block_storage.get("/limits").json()["limits"]["absolute"]
                   ["totalVolumesUsed"] for r in vg.sandbox.regions)

    def merged() -> int:
        limits = vg.vcall("GET", "/limits")
        assert limits.status_code == 200, limits.text
        return limits.json()["limits"]["absolute"]["totalVolumesUsed"]

    merged_equals_direct(direct, merged, minimum=len(made), what="volumes used via the gateway")
    for volume in made:
        vg.vcall("DELETE", f"/volumes/{volume['id']}")


def region_volume_url(vg: Volumes, region: str) -> str:
    ident = vg.conns["isthmus-admin"].identity
    types = {s.id: s.type for s in ident.services()}
    (url,) = [e.url for e in ident.endpoints(interface="public")
              if types[e.service_id] == "volumev3" and e.region_id == region]
    return url


def test_version_documents_are_cinders_with_gateway_links(vg):
    region = region_volume_url(vg, "RegionOne")  # .../v3
    region_root = region.rsplit("/v3", 1)[0]
    for path, status in (("/", 300), ("/v3/", 200)):
        theirs = requests.get(region_root + path, headers={"X-Auth-Token": vg.token()}, timeout=30)
        ours = requests.get(vg.url + "/volume" + path, headers={"X-Auth-Token": vg.token()}, timeout=30)
        assert (theirs.status_code, ours.status_code) == (status, status)
        (mine,), (cinder,) = ours.json()["versions"], theirs.json()["versions"]
        assert mine["links"] == [*cinder["links"][:-1], {"rel": "self", "href": vg.volume + "/"}]
        assert {k: v for k, v in mine.items() if k != "links"} == {k: v for k, v in cinder.items() if k != "links"}


def test_an_empty_id_is_cinders_404(vg):
    for collection in ("volumes", "snapshots"):
        for method in ("GET", "PUT", "DELETE", "POST"):
            resp = vg.vcall(method, f"/{collection}/", json={})
            assert resp.status_code == 404, (method, collection, resp.status_code, resp.text[:200])


def tagged_volumes(vg: Volumes, tag: str, sizes: dict[str, list[int]]) -> list[dict]:
    """Volumes carrying metadata tag=<tag>, the given sizes per AZ, all available."""
    made = [vg.create_volume(az, size=size, name=f"{tag}-{az}-{i}", metadata={"tag": tag})
            for az, az_sizes in sizes.items() for i, size in enumerate(az_sizes)]
    return [vg.wait_volume(v["id"]) for v in made]


def by_tag(tag: str) -> str:
    return "metadata=" + urllib.parse.quote(json.dumps({"tag": tag}))


def test_merged_volume_pages_link_the_next_when_full_and_honour_offset(vg):
    tag = name()
    volumes = tagged_volumes(vg, tag, {"az1": [1, 1], "az2": [1, 1]})
    ordered = sorted(v["name"] for v in volumes)
    for detail in ("", "/detail"):
        url: str | None = f"{vg.volume}/volumes{detail}?{by_tag(tag)}&sort=name:asc&limit=2"
        pages, seen = 0, []
        while url:
            doc = vg.call("GET", url).json()
            pages += 1
            seen += [v["name"] for v in doc["volumes"]]
            nxt = [link["href"] for link in doc.get("volumes_links", []) if link["rel"] == "next"]
            if nxt:  # Cinder links a next page after every full page, so 4 by 2 is 3 pages
                assert nxt[0].startswith(f"{vg.volume}/volumes{detail}?")
            url = nxt[0] if nxt else None
        assert (seen, pages) == (ordered, 3)
    # offset counts in the merged order, over both regions
    doc = vg.vcall("GET", f"/volumes?{by_tag(tag)}&sort=name:asc&offset=1&limit=2").json()
    assert [v["name"] for v in doc["volumes"]] == ordered[1:3]
    assert vg.vcall("GET", "/volumes?offset=-1").status_code == 400


METADATA_FILTER = {"OpenStack-API-Version": "volume 3.22"}  # snapshot lists filter on metadata from 3.22


def test_snapshot_brief_list_is_cinders_summary_view_merged(vg):
    tag = name()
    volumes = tagged_volumes(vg, tag, {"az1": [1], "az2": [1]})

    def snapshots(query: str) -> dict:
        return vg.vcall("GET", f"/snapshots?{by_tag(tag)}&{query}", headers=METADATA_FILTER).json()

    made: list[str] = []
    for volume in volumes + volumes[:1]:
        body = {"snapshot": {"volume_id": volume["id"], "name": f"{tag}-{len(made)}", "metadata": {"tag": tag}}}
        resp = vg.vcall("POST", "/snapshots", json=body)
        assert resp.status_code == 202, resp.text
        made.append(resp.json()["snapshot"]["id"])
    deadline = time.monotonic() + 120
    while True:
        listed = snapshots("sort=display_name:asc")["snapshots"]
        if len(listed) == 3 and {s["status"] for s in listed} == {"available"}:
            break
        assert time.monotonic() < deadline, listed
        time.sleep(1)
    assert set(listed[0]) == {"id", "created_at", "updated_at", "name", "description", "volume_id", "status",
                              "size", "metadata"}
    assert [s["name"] for s in listed] == [f"{tag}-{i}" for i in range(3)]
    for key, field in (("display_name", "name"), ("created_at", "created_at"), ("id", "id")):
        for direction in ("asc", "desc"):
            got = [s[field] for s in snapshots(f"sort_key={key}&sort_dir={direction}")["snapshots"]]
            assert got == sorted(got, reverse=direction == "desc") and len(got) == 3
    offset = snapshots("sort=display_name:asc&offset=2&limit=3")
    assert [s["name"] for s in offset["snapshots"]] == [f"{tag}-2"] and "snapshots_links" not in offset
    one = snapshots("sort=display_name:asc&limit=1")
    assert [link["rel"] for link in one["snapshots_links"]] == ["next"]
    assert one["snapshots_links"][0]["href"].startswith(vg.volume + "/snapshots?")
    for snapshot_id in made:
        vg.vcall("DELETE", f"/snapshots/{snapshot_id}")


def test_volume_summary_adds_up_every_region(vg):
    tag = name()
    tagged_volumes(vg, tag, {"az1": [1], "az2": [2]})
    regions = [region_volume_url(vg, r) for r in ("RegionOne", "RegionTwo")]

    def summaries(version: str) -> tuple[list[dict], dict]:
        hdrs = {"OpenStack-API-Version": f"volume {version}"}
        theirs = [vg.call("GET", f"{url}/volumes/summary", headers=hdrs).json()["volume-summary"] for url in regions]
        resp = vg.vcall("GET", "/volumes/summary", headers=hdrs)
        assert resp.status_code == 200, resp.text
        return theirs, resp.json()["volume-summary"]

    theirs, ours = summaries("3.36")
    assert ours["total_count"] == sum(s["total_count"] for s in theirs) >= 2
    assert ours["total_size"] == sum(s["total_size"] for s in theirs) >= 3
    assert tag in ours["metadata"]["tag"]
    assert {k for s in theirs for k in s["metadata"]} == set(ours["metadata"])
    theirs, ours = summaries("3.12")
    assert "metadata" not in ours and ours["total_count"] == sum(s["total_count"] for s in theirs)
    assert vg.vcall("GET", "/volumes/summary").status_code == 404  # before 3.12 it names no volume, as in Cinder
