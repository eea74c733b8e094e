"""isthmus-gateway on the sandbox: Trio2o's behaviours through CentralRegion.

Users' view: the real ``openstack`` CLI / openstacksdk with ``--os-region-name
CentralRegion``, or plain HTTP where the behaviour is about the wire (headers,
status codes, links). Regional APIs are only used to check where things landed.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.integration.helpers import eventually, sandbox_cli, sandbox_layout
from tests.sandboxes import BIN

pytestmark = pytest.mark.integration
CENTRAL = "CentralRegion"
NONE_NET = {"OpenStack-API-Version": "compute 2.37"}  # networks: "none"


def cli(sandbox, *args: str, cloud: str = "isthmus-demo", check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([str(BIN / "openstack"), "--os-cloud", cloud, "--os-region-name", CENTRAL, *args],
                            env=sandbox.env(), capture_output=True, text=True, timeout=300)
    if check:
        assert result.returncode == 0, f"openstack {' '.join(args)}: {result.stderr}"
    return result


class Gateway:
    def __init__(self, sandbox) -> None:
        from isthmus.sandbox.glance import TINY_IMAGE_ID
        from isthmus.sandbox.nova import FLAVOR_ID

        self.sandbox = sandbox
        self.layout = sandbox_layout(sandbox.state_dir)
        self.url = f"http://127.0.0.1:{self.layout.gateway_port}"
        self.compute = self.url + "/compute/v2.1"
        self.image, self.flavor = TINY_IMAGE_ID, FLAVOR_ID
        self.conns = {c: sandbox.connect(CENTRAL, cloud=c) for c in ("isthmus-demo", "isthmus-admin")}
        self.http = requests.Session()

    def token(self, cloud: str = "isthmus-demo") -> str:
        return self.conns[cloud].session.get_token()

    def project(self, cloud: str = "isthmus-demo") -> str:
        return self.conns[cloud].current_project_id

    def call(self, method: str, path: str, cloud: str = "isthmus-demo", token: str | None = None,
             headers: dict | None = None, **kw) -> requests.Response:
        url = path if path.startswith("http") else self.compute + path
        hdrs = {"X-Auth-Token": token or self.token(cloud), **(headers or {})}
        return self.http.request(method, url, headers=hdrs, timeout=120, **kw)

    def boot(self, name: str, az: str | None = None, cloud: str = "isthmus-demo", token: str | None = None,
             flavor: str | None = None, **extra) -> requests.Response:
        server = {"name": name, "imageRef": self.image, "flavorRef": flavor or self.flavor, "networks": "none", **extra}
        if az:
            server["availability_zone"] = az
        return self.call("POST", "/servers", cloud, token, headers=NONE_NET, json={"server": server})

    def wait(self, server_id: str, status: str = "ACTIVE", cloud: str = "isthmus-demo", token: str | None = None,
             timeout: float = 180) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            resp = self.call("GET", f"/servers/{server_id}", cloud, token,
                             headers={"OpenStack-API-Version": "compute 2.47"})  # flavor.original_name
            if resp.status_code == 200:
                server = resp.json()["server"]
                if server["status"] == status:
                    return server
                assert server["status"] != "ERROR", server
            assert time.monotonic() < deadline, f"{server_id} not {status}: {resp.status_code} {resp.text[:300]}"
            time.sleep(1)

    def region_of(self, server_id: str) -> str | None:
        for region in self.sandbox.regions:
            admin = self.sandbox.connect(region, cloud="isthmus-admin")
            if admin.compute.find_server(server_id, ignore_missing=True, all_projects=True):
                return region
        return None

    def registry(self):
        from isthmus.db import make_engine
        from isthmus.registry import Registry
        return Registry(make_engine(self.layout.isthmus_db_url))


@pytest.fixture(scope="module")
def gw(sandbox):
    gateway = Gateway(sandbox)
    yield gateway
    delete_servers_named(gateway, "gw-")


def name(prefix: str = "gw") -> str:
    """A server or volume name; each gateway module has its own prefix, which its
    cleanup deletes (modules run side by side on the test workers)."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def delete_servers_named(gateway: Gateway, prefix: str) -> None:
    """The servers a module made, in both projects, found by their names' prefix."""
    for cloud in ("isthmus-demo", "isthmus-admin"):
        resp = gateway.call("GET", "/servers?all_tenants=1" if cloud == "isthmus-admin" else "/servers", cloud)
        for server in resp.json().get("servers", []) if resp.status_code == 200 else []:
            if server["name"].startswith(prefix):
                gateway.call("DELETE", f"/servers/{server['id']}", cloud)


# --- 1-4: versions, auth, catalog, microversions ---------------------------------------

def test_01_versions_without_token(gw):
    resp = requests.get(gw.url + "/", timeout=30)
    assert resp.status_code == 200
    (v21,) = [v for v in resp.json()["versions"] if v["id"] == "v2.1"]
    assert v21["min_version"] == "2.1" and v21["version"]
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert requests.request(method, gw.url + "/", timeout=30).status_code == 404


def test_02_token_required_and_request_id(gw):
    for headers in ({}, {"X-Auth-Token": "not-a-token"}):
        resp = requests.get(gw.compute + "/servers", headers=headers, timeout=30)
        assert resp.status_code == 401
        assert re.match(r"^req-[0-9a-f-]{36}$", resp.headers["x-openstack-request-id"])
    assert re.match(r"^req-", gw.call("GET", "/servers").headers["x-openstack-request-id"])


def test_03_catalog_central_compute_is_only_the_gateway(gw):
    ident = gw.conns["isthmus-admin"].identity
    types = {s.id: s.type for s in ident.services()}
    compute = [e for e in ident.endpoints(interface="public") if types[e.service_id] == "compute"]
    central = [e.url for e in compute if e.region_id == CENTRAL]
    assert central == [gw.compute]
    for region in gw.sandbox.regions:
        assert [e for e in compute if e.region_id == region and not e.url.startswith(gw.url)]


def test_04_microversions(gw):
    resp = gw.call("GET", "/servers", headers={"OpenStack-API-Version": "compute 2.30"})
    assert resp.status_code == 200
    assert resp.headers["OpenStack-API-Version"] == "compute 2.30"
    assert "OpenStack-API-Version" in resp.headers["Vary"]
    for bad in ("compute 9.9", "compute 2.a", "2.30", "compute 3.2"):
        resp = gw.call("GET", "/servers", headers={"OpenStack-API-Version": bad})
        assert resp.status_code == 406 and "computeFault" in resp.json(), bad
    advertised = requests.get(gw.url + "/", timeout=30).json()["versions"][0]["version"]
    for region in gw.sandbox.regions:
        regional = gw.sandbox.connect(region).compute.get_endpoint().rsplit("/v2.1", 1)[0]
        region_max = [v for v in requests.get(regional + "/", timeout=30).json()["versions"] if v["id"] == "v2.1"][0]
        assert tuple(map(int, advertised.split("."))) <= tuple(map(int, region_max["version"].split(".")))
    latest = gw.call("GET", "/servers", headers={"OpenStack-API-Version": "compute latest"})
    assert latest.headers["OpenStack-API-Version"] == f"compute {advertised}"


# --- 7-14: AZs, placement, bindings, show, delete ---------------------------------------

def test_07_availability_zones_from_the_registry(gw):
    zones = json.loads(cli(gw.sandbox, "availability", "zone", "list", "--compute", "-f", "json").stdout)
    assert sorted(z["Zone Name"] for z in zones) == ["az1", "az2"]


def test_08_cli_create_in_az_lands_in_that_region_and_binds(gw):
    server_name = name()
    out = json.loads(cli(gw.sandbox, "server", "create", "--image", "tiny", "--flavor", "m1.tiny", "--nic", "none",
                         "--availability-zone", "az2", "--wait", server_name, "-f", "json").stdout)
    assert out["status"] == "ACTIVE" and out["OS-EXT-AZ:availability_zone"] == "az2"
    assert gw.region_of(out["id"]) == "RegionTwo"
    pods = {p.pod_id: p.region_name for p in gw.registry().pods()}
    from isthmus.registry.bindings import Bindings
    bound = [pods[b.pod_id] for b in Bindings(gw.registry().engine).list(gw.project())]
    assert "RegionTwo" in bound
    routed = gw.registry().routings_of(out["id"], "server")
    assert [pods[r.pod_id] for r in routed] == ["RegionTwo"]


def test_10_no_az_lands_in_the_oldest_binding(gw):
    from isthmus.registry.bindings import Bindings
    assert gw.boot(name(), az="az2").status_code == 202  # make sure a binding exists
    pods = {p.pod_id: p.region_name for p in gw.registry().pods()}
    first = pods[Bindings(gw.registry().engine).list(gw.project())[0].pod_id]
    resp = gw.boot(name())
    assert resp.status_code == 202
    assert gw.region_of(resp.json()["server"]["id"]) == first


def test_11_prebound_project_lands_in_its_region(gw):
    import openstack

    from isthmus.registry.bindings import Bindings
    from isthmus.sandbox.layout import PASSWORD

    ident = gw.conns["isthmus-admin"].identity
    project = ident.create_project(name=name(), domain_id="default")
    user = ident.create_user(name=name(), password=PASSWORD, domain_id="default")
    ident.assign_project_role_to_user(project, user, ident.find_role("member"))
    try:
        two = gw.registry().find_pod("RegionTwo")
        Bindings(gw.registry().engine).bind(project.id, two.pod_id)
        conn = openstack.connect(auth_url=gw.layout.auth_url, username=user.name, password=PASSWORD,
                                 project_id=project.id, user_domain_name="Default", region_name=CENTRAL)
        token = conn.session.get_token()
        resp = gw.boot(name(), token=token)
        assert resp.status_code == 202, resp.text
        sid = resp.json()["server"]["id"]
        assert gw.region_of(sid) == "RegionTwo"
        gw.call("DELETE", f"/servers/{sid}", token=token)
    finally:
        ident.delete_user(user)
        ident.delete_project(project)


def test_12_unknown_az_is_400_and_binds_nothing(gw):
    from isthmus.registry.bindings import Bindings
    before = Bindings(gw.registry().engine).list(gw.project())
    resp = gw.boot(name(), az="nope")
    assert resp.status_code == 400 and "badRequest" in resp.json()
    assert Bindings(gw.registry().engine).list(gw.project()) == before


def test_13_14_show_unknown_delete_gone(gw):
    resp = gw.boot(name(), az="az1")
    sid = resp.json()["server"]["id"]
    server = gw.wait(sid)
    assert server["id"] == sid and server["OS-EXT-AZ:availability_zone"] == "az1"
    unknown = gw.call("GET", f"/servers/{uuid.uuid4()}")
    assert unknown.status_code == 404 and "itemNotFound" in unknown.json()
    assert gw.call("DELETE", f"/servers/{sid}").status_code == 204
    deadline = time.monotonic() + 120
    while gw.call("GET", f"/servers/{sid}").status_code != 404:
        assert time.monotonic() < deadline
        time.sleep(1)
    assert gw.registry().routings_of(sid, "server") == []  # the 404 dropped the routing
    assert gw.call("DELETE", f"/servers/{sid}").status_code == 404


def test_15_actions_pass_through(gw):
    sid = gw.boot(name(), az="az2").json()["server"]["id"]
    gw.wait(sid)
    assert gw.call("POST", f"/servers/{sid}/action", json={"os-stop": None}).status_code == 202
    gw.wait(sid, "SHUTOFF")
    again = gw.call("POST", f"/servers/{sid}/action", json={"os-stop": None})
    assert again.status_code == 409 and "conflictingRequest" in again.json()
    assert str(gw.layout.region_port("RegionTwo", "nova")) not in again.text


# --- 19-24: merged lists ----------------------------------------------------------------

def test_19_21_23_merged_sorted_paginated_with_gateway_links(gw):
    tag = name()
    ids = []
    for i in range(5):
        resp = gw.boot(f"{tag}-{i}", az="az1" if i % 2 else "az2")
        assert resp.status_code == 202, resp.text
        ids.append(resp.json()["server"]["id"])
    # Until scheduled, Nova lists a server from its build request, with another
    # "created" than the instance it becomes: orders compared below must not move.
    for sid in ids:
        gw.wait(sid)
    everything = gw.call("GET", "/servers/detail").json()["servers"]
    mine = [s for s in everything if s["name"].startswith(tag)]
    assert sorted(s["id"] for s in mine) == sorted(ids)  # each once
    # Newest first. Within one displayed second the order is each region's own: Nova
    # sorts by microseconds the API does not show, so (created, id) is no total order.
    created = [s["created"] for s in everything]
    assert created == sorted(created, reverse=True)
    assert {s["OS-EXT-AZ:availability_zone"] for s in mine} == {"az1", "az2"}
    for s in mine:
        assert all(link["href"].startswith(gw.url + "/compute/") for link in s["links"])
    named = gw.call("GET", f"/servers?name={tag}-1").json()["servers"]
    assert [s["id"] for s in named] == [ids[1]]
    # Pages of 2 over this test's servers (other tests boot and delete in the same
    # project meanwhile) reproduce their list, with gateway next links.
    listed = [s["id"] for s in gw.call("GET", f"/servers/detail?name={tag}").json()["servers"]]
    assert sorted(listed) == sorted(ids)
    url, seen, pages = gw.compute + f"/servers/detail?limit=2&name={tag}", [], 0
    while url:
        page = gw.call("GET", url).json()
        pages += 1
        assert len(page["servers"]) <= 2
        seen += [s["id"] for s in page["servers"]]
        nxt = [link["href"] for link in page.get("servers_links", []) if link["rel"] == "next"]
        if nxt:
            assert nxt[0].startswith(gw.compute + "/servers/detail?") and "marker=" in nxt[0]
        url = nxt[0] if nxt else None
    assert seen == listed and pages == 3
    # The SDK pages through the gateway too.
    sdk = [s.id for s in gw.conns["isthmus-demo"].compute.servers(limit=2, name=tag)]
    assert sdk == listed


def test_24_server_created_in_a_region_is_listed_then_shown(gw):
    conn = gw.sandbox.connect("RegionOne")
    direct = conn.compute.create_server(name=name(), image_id=gw.image, flavor_id=gw.flavor, networks="none")
    listed = [s["id"] for s in gw.call("GET", "/servers").json()["servers"]]
    assert direct.id in listed
    assert gw.call("GET", f"/servers/{direct.id}").status_code == 200
    conn.compute.delete_server(direct)


# --- 25-29: global objects --------------------------------------------------------------

def test_25_flavors_are_global(gw):
    flavor = {"flavor": {"name": name(), "ram": 64, "vcpus": 1, "disk": 1, "id": str(uuid.uuid4())}}
    assert gw.call("POST", "/flavors", json=flavor).status_code == 403
    created = gw.call("POST", "/flavors", "isthmus-admin", json=flavor)
    assert created.status_code == 200
    fid = created.json()["flavor"]["id"]
    assert gw.call("POST", "/flavors", "isthmus-admin", json=flavor).status_code == 409
    detail = [f for f in gw.call("GET", "/flavors/detail").json()["flavors"] if f["id"] == fid][0]
    for key in ("ram", "disk", "vcpus", "OS-FLV-EXT-DATA:ephemeral", "os-flavor-access:is_public", "links"):
        assert key in detail
    for az in ("az1", "az2"):
        sid = gw.boot(name(), az=az, flavor=fid).json()["server"]["id"]
        assert gw.wait(sid)["flavor"]["original_name"] == flavor["flavor"]["name"]
        gw.call("DELETE", f"/servers/{sid}")
    assert gw.call("DELETE", f"/flavors/{fid}").status_code == 403
    assert gw.call("DELETE", f"/flavors/{fid}", "isthmus-admin").status_code == 202
    assert gw.call("GET", f"/flavors/{fid}").status_code == 404
    two = gw.sandbox.connect("RegionTwo", cloud="isthmus-admin")
    deadline = time.monotonic() + 60
    while two.compute.find_flavor(fid, ignore_missing=True):  # the job removes it everywhere
        assert time.monotonic() < deadline, "flavor not deleted in RegionTwo"
        time.sleep(1)


def test_27_keypairs_are_global(gw):
    key_name = name()
    public = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH0nrMxFuUDg2QUlY5W3nTFaDXw/ZRcEMZ8CqnMd9gzx " + key_name)
    pub_file = gw.sandbox.state_dir / f"{key_name}.pub"
    pub_file.write_text(public + "\n")
    cli(gw.sandbox, "keypair", "create", "--public-key", str(pub_file), key_name)
    listed = [k["keypair"]["name"] for k in gw.call("GET", "/os-keypairs").json()["keypairs"]]
    assert listed.count(key_name) == 1
    for az in ("az1", "az2"):
        sid = gw.boot(name(), az=az, key_name=key_name).json()["server"]["id"]
        assert gw.wait(sid)["key_name"] == key_name
    cli(gw.sandbox, "keypair", "delete", key_name)


def test_28_images_through_the_gateway(gw):
    images = json.loads(cli(gw.sandbox, "image", "list", "-f", "json").stdout)
    assert gw.image in [i["ID"] for i in images]
    detail = gw.call("GET", "/images/detail").json()["images"]
    tiny = [i for i in detail if i["id"] == gw.image][0]
    for key in ("status", "minRam", "minDisk", "metadata"):
        assert key in tiny
    assert all(link["href"].startswith(gw.url) for link in tiny["links"] if link["rel"] != "alternate")
    assert gw.call("GET", f"/images/{uuid.uuid4()}").status_code == 404


@pytest.mark.exclusive
def test_29_quotas_enforced_across_regions(gw):
    admin_id = gw.project("isthmus-admin")
    project = gw.project()
    put = gw.call("PUT", f"/os-quota-sets/{project}", "isthmus-admin", json={"quota_set": {"instances": 1000}})
    assert put.status_code == 200
    assert gw.call("PUT", f"/os-quota-sets/{project}", json={"quota_set": {"instances": 3}}).status_code == 403
    assert gw.call("PUT", f"/{admin_id}/os-quota-sets/{project}", "isthmus-admin",
                   json={"quota_set": {"nope": 3}}).status_code == 400
    for _ in range(5):  # deletes of earlier tests may finish in between: retry until stable
        in_use = gw.call("GET", f"/os-quota-sets/{project}/detail").json()["quota_set"]["instances"]["in_use"]
        per_region = 0
        for region in gw.sandbox.regions:
            regional = gw.sandbox.connect(region).compute.get_endpoint()
            detail = gw.call("GET", f"{regional}/os-quota-sets/{project}/detail").json()["quota_set"]
            per_region += detail["instances"]["in_use"]
        if in_use == per_region:
            break
        time.sleep(2)
    assert in_use == per_region  # summed over regions
    assert gw.call("PUT", f"/os-quota-sets/{project}", "isthmus-admin",
                   json={"quota_set": {"instances": in_use}}).status_code == 200
    try:
        limits = gw.call("GET", "/limits").json()["limits"]["absolute"]
        assert limits["maxTotalInstances"] == in_use and limits["totalInstancesUsed"] == in_use
        refused = gw.boot(name(), az="az2")
        assert refused.status_code == 403 and "Quota exceeded" in refused.text
    finally:
        gw.call("PUT", f"/os-quota-sets/{project}", "isthmus-admin", json={"quota_set": {"instances": -1}})


@contextlib.contextmanager
def fresh_project(gw, instances: int):
    """A new project and member with an instance limit of ``instances``: its usage is
    0 and no earlier test's deletes change it. Yields the member's token; its servers
    are deleted (and waited for) at the end."""
    import openstack

    from isthmus.sandbox.layout import PASSWORD

    ident = gw.conns["isthmus-admin"].identity
    project = ident.create_project(name=name(), domain_id="default")
    user = ident.create_user(name=name(), password=PASSWORD, domain_id="default")
    ident.assign_project_role_to_user(project, user, ident.find_role("member"))
    conn = openstack.connect(auth_url=gw.layout.auth_url, username=user.name, password=PASSWORD,
                             project_id=project.id, user_domain_name="Default", region_name=CENTRAL)
    token = conn.session.get_token()
    try:
        assert gw.call("PUT", f"/os-quota-sets/{project.id}", "isthmus-admin",
                       json={"quota_set": {"instances": instances}}).status_code == 200
        yield token
    finally:
        made = [s["id"] for s in gw.call("GET", "/servers", token=token).json()["servers"]]
        for server_id in made:
            gw.call("DELETE", f"/servers/{server_id}", token=token)
        for server_id in made:
            deadline = time.monotonic() + 120
            while gw.call("GET", f"/servers/{server_id}", token=token).status_code != 404:
                assert time.monotonic() < deadline, f"{server_id} not deleted"
                time.sleep(1)
        ident.delete_user(user)
        ident.delete_project(project)


def test_29b_concurrent_creates_never_exceed_the_global_quota(gw):
    """Check-then-create alone lets every concurrent create see the same usage;
    reservations admit exactly what fits."""
    with fresh_project(gw, instances=2) as token:
        zones = ["az1", "az2"]
        with ThreadPoolExecutor(6) as pool:
            replies = list(pool.map(lambda n: gw.boot(name(), az=zones[n % 2], token=token), range(6)))
        made = [r.json()["server"]["id"] for r in replies if r.status_code == 202]
        refused = [r for r in replies if r.status_code == 403]
        assert len(made) == 2 and len(refused) == 4, [(r.status_code, r.text[:200]) for r in replies]
        assert all("Quota exceeded" in r.text for r in refused)


def test_29b_a_create_right_after_a_202_counts_the_server_nova_does_not_show_yet(gw):
    """Nova's usage shows a server only once the conductor has written it to a cell,
    after the 202 (CI made 3 servers under a limit of 2 when a reservation stopped
    counting at the 202). Once the servers are built, none is counted twice."""
    with fresh_project(gw, instances=2) as token:
        first = gw.boot(name(), az="az1", token=token)
        second = gw.boot(name(), az="az2", token=token)
        third = gw.boot(name(), az="az1", token=token)
        assert (first.status_code, second.status_code) == (202, 202), (first.text[:200], second.text[:200])
        assert third.status_code == 403 and "Quota exceeded" in third.text, third.text[:300]
        kept, dropped = first.json()["server"]["id"], second.json()["server"]["id"]
        gw.wait(kept, token=token)
        gw.wait(dropped, token=token)
        assert gw.call("DELETE", f"/servers/{dropped}", token=token).status_code == 204
        deadline = time.monotonic() + 120
        while gw.call("GET", f"/servers/{dropped}", token=token).status_code != 404:
            assert time.monotonic() < deadline, f"{dropped} not deleted"
            time.sleep(1)
        again = gw.boot(name(), az="az2", token=token)
        assert again.status_code == 202, again.text[:300]


def test_29c_concurrent_multi_creates_never_exceed_the_global_quota(gw):
    """Issue 26 item 1, as reproduced: instance limit 2, two concurrent boots (one per
    region) with ``min_count=1, max_count=3`` made 4 servers; a multi-create now
    reserves what it may make, its max_count clamped to what fits."""
    with fresh_project(gw, instances=2) as token:
        with ThreadPoolExecutor(2) as pool:
            replies = list(pool.map(lambda az: gw.boot(name(), az=az, token=token, min_count=1, max_count=3),
                                    ["az1", "az2"]))
        assert [r.status_code for r in replies].count(202) >= 1, [(r.status_code, r.text[:200]) for r in replies]
        assert all(r.status_code in (202, 403) for r in replies), [(r.status_code, r.text[:200]) for r in replies]
        servers = gw.call("GET", "/servers", token=token).json()["servers"]
        assert len(servers) == 2, servers


# --- 30, 33: scoping, duplicate creates ---------------------------------------------------

def test_30_project_scoping(gw):
    admin_project = gw.project("isthmus-admin")
    assert gw.call("GET", f"/{admin_project}/servers").status_code == 403
    assert gw.call("GET", f"/{gw.project()}/servers").status_code == 200
    assert gw.call("GET", "/servers").status_code == 200
    # An admin passes the gateway's check; Nova itself then judges the URL (it wants the token's project).
    assert gw.call("GET", f"/{gw.project()}/servers", "isthmus-admin").status_code != 403


def test_33_identical_creates_under_one_request_id_make_one_server(gw):
    server_name = name()
    rid = f"req-{uuid.uuid4()}"
    token = gw.token()
    body = {"server": {"name": server_name, "imageRef": gw.image, "flavorRef": gw.flavor, "networks": "none",
                       "availability_zone": "az1"}}

    def post(_):
        return gw.call("POST", "/servers", token=token, headers={**NONE_NET, "X-OpenStack-Request-ID": rid}, json=body)

    with ThreadPoolExecutor(3) as pool:
        replies = list(pool.map(post, range(3)))
    assert {r.status_code for r in replies} == {202}
    assert len({r.json()["server"]["id"] for r in replies}) == 1
    assert len([s for s in gw.call("GET", f"/servers?name={server_name}").json()["servers"]]) == 1


def test_33b_a_retry_through_the_gateway_after_the_first_reply_replays_it(gw):
    """Sequential retries (another process, or after a timeout the client saw) get the
    first attempt's server, not a second one: the outcome is kept in the Isthmus DB."""
    server_name = name()
    headers = {**NONE_NET, "X-OpenStack-Request-ID": f"req-{uuid.uuid4()}"}
    body = {"server": {"name": server_name, "imageRef": gw.image, "flavorRef": gw.flavor, "networks": "none",
                       "availability_zone": "az2"}}
    first = gw.call("POST", "/servers", headers=headers, json=body)
    assert first.status_code == 202
    again = gw.call("POST", "/servers", headers=headers, json=body)
    assert again.status_code == 202 and again.json()["server"]["id"] == first.json()["server"]["id"]
    assert "adminPass" not in again.json()["server"]
    assert len(gw.call("GET", f"/servers?name={server_name}").json()["servers"]) == 1
    gw.call("DELETE", f"/servers/{first.json()['server']['id']}")


# --- conformance: what Tempest reads -----------------------------------------------

def test_replies_carry_nova_legacy_version_header_and_the_regions_request_id(gw):
    v = {"OpenStack-API-Version": "compute 2.96"}
    for path in ("/os-availability-zone", "/servers", "/flavors"):  # made by the gateway, merged, forwarded
        resp = gw.call("GET", path, headers=v)
        assert resp.headers.get("X-OpenStack-Nova-API-Version") == "2.96", path
        assert resp.headers["OpenStack-API-Version"] == "compute 2.96", path
    created = gw.boot(name(), az="az1")
    sid = created.json()["server"]["id"]
    try:
        rid = created.headers["x-openstack-request-id"]
        gw.wait(sid)  # the conductor records the create action while building
        action = gw.call("GET", f"/servers/{sid}/os-instance-actions/{rid}", headers=v)
        assert action.status_code == 200 and action.json()["instanceAction"]["action"] == "create"
        server = gw.call("GET", f"/servers/{sid}", headers=v).json()["server"]
        assert server["pinned_availability_zone"] == "az1"  # the top-level AZ it was created in
    finally:
        gw.call("DELETE", f"/servers/{sid}")


# --- 22: a region down ------------------------------------------------------------------------

@pytest.mark.exclusive
def test_22_region_down_is_skipped_503_by_id_and_strict(gw, tmp_path):
    from isthmus.sandbox import nova, process

    sid = gw.boot(name(), az="az2").json()["server"]["id"]
    gw.wait(sid)
    (record,) = [r for r in process.ServiceRecord.load_all(gw.layout.run) if r.name == "nova-api-RegionTwo"]
    process.stop(record)
    strict = None
    try:
        started = time.monotonic()
        resp = gw.call("GET", "/servers/detail")
        assert resp.status_code == 200 and time.monotonic() - started < 30
        assert sid not in [s["id"] for s in resp.json()["servers"]]
        by_id = gw.call("GET", f"/servers/{sid}")
        assert by_id.status_code == 503 and "serviceUnavailable" in by_id.json()
        # A second gateway in strict mode refuses an incomplete list.
        conf = (gw.sandbox.state_dir / "etc" / "isthmus" / "gateway.conf").read_text()
        port = gw.layout.gateway_port + 1000
        conf = conf.replace(f"bind_port = {gw.layout.gateway_port}", f"bind_port = {port}")
        conf = conf.replace("[gateway]\n", "[gateway]\nstrict_lists = true\n")
        (tmp_path / "strict.conf").write_text(conf)
        strict = subprocess.Popen([str(BIN / "python"), "-m", "isthmus.gateway.service", "--config-file",
                                   str(tmp_path / "strict.conf")], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}/compute/v2.1/servers/detail"
        deadline = time.monotonic() + 60
        while True:
            try:
                resp = requests.get(url, headers={"X-Auth-Token": gw.token()}, timeout=30)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline
                time.sleep(0.5)
        assert resp.status_code == 503
    finally:
        if strict:
            strict.terminate()
            strict.wait(10)
        from isthmus.sandbox import runtime
        runtime.wait_http(nova.start_api(gw.layout, "RegionTwo"))
    gw.wait(sid)


# --- security: service credentials act only on what the caller may use ----------------------
def _other_region(gw) -> tuple[str, str]:
    """(a region that is not the master, its AZ)."""
    from isthmus.sandbox.gateway import master_region

    master = master_region(gw.layout)
    region = next(r for r in gw.sandbox.regions if r != master)
    return region, gw.layout.availability_zone(region)


def test_a_users_create_never_deletes_a_flavor_the_master_lacks(gw):
    """Before: the inline flavor sync (service credentials) deleted, in the target
    region, a flavor the user named that the master region does not have."""
    region, az = _other_region(gw)
    admin = gw.sandbox.connect(region, cloud="isthmus-admin")
    flavor = admin.compute.create_flavor(name=f"gw-{uuid.uuid4().hex[:6]}", ram=64, vcpus=1, disk=1,
                                         id=f"gw-local-{uuid.uuid4().hex[:8]}")
    try:
        resp = gw.boot(name(), az=az, flavor=flavor.id)
        assert resp.status_code in (202, 400), resp.text
        assert admin.compute.find_flavor(flavor.id, ignore_missing=True) is not None
    finally:
        admin.compute.delete_flavor(flavor.id, ignore_missing=True)


def test_a_private_image_of_another_project_is_never_copied_for_a_user(gw):
    """Before: a user naming another project's private master image made the
    gateway's admin account copy it into the target region."""
    from isthmus.sandbox.gateway import master_region

    region, az = _other_region(gw)
    master_glance = gw.sandbox.connect(master_region(gw.layout), cloud="isthmus-admin").image
    image = master_glance.create_image(name=f"gw-{uuid.uuid4().hex[:6]}", disk_format="raw",
                                       container_format="bare", visibility="private", data=b"secret" * 100)
    try:
        resp = gw.call("POST", "/servers", headers=NONE_NET, json={"server": {
                "name": name(), "imageRef": image.id, "flavorRef": gw.flavor, "networks": "none",
                "availability_zone": az}})
        assert resp.status_code == 400, resp.text  # Nova in the region does not know it
        there = gw.sandbox.connect(region, cloud="isthmus-admin").image.find_image(image.id, ignore_missing=True)
        assert there is None
        bad = gw.call("POST", "/servers", headers=NONE_NET, json={"server": {
            "name": name(), "imageRef": "../../v2/images", "flavorRef": gw.flavor, "networks": "none",
            "availability_zone": az}})
        assert bad.status_code == 400 and "imageRef" in bad.json()["badRequest"]["message"]
    finally:
        master_glance.delete_image(image.id, ignore_missing=True)


@pytest.mark.exclusive
def test_global_objects_made_around_the_gateway_are_resynced(gw):
    """Issue 25 hole 5: a flavor and extra spec written at the master's own Nova (not
    through the gateway: no write event) reach the other regions by the periodic
    resync; a flavor only another region holds is never deleted by it."""
    from isthmus.sandbox import xjob
    from isthmus.sandbox.gateway import master_region

    master = master_region(gw.layout)
    region, _ = _other_region(gw)
    at_master = gw.sandbox.connect(master, cloud="isthmus-admin")
    there = gw.sandbox.connect(region, cloud="isthmus-admin")
    fid, local_fid = f"gw-resync-{uuid.uuid4().hex[:8]}", f"gw-local-{uuid.uuid4().hex[:8]}"
    at_master.compute.create_flavor(name=fid, ram=64, vcpus=1, disk=1, id=fid)
    at_master.compute.create_flavor_extra_specs(fid, {"isthmus:test": "resynced"})
    there.compute.create_flavor(name=local_fid, ram=64, vcpus=1, disk=1, id=local_fid)
    override = xjob.config_dir(gw.layout) / "60-test-gateway-resync.conf"
    override.write_text("[gateway_sync]\nresync_interval = 5\n")
    try:
        sandbox_cli(gw.sandbox, "sandbox", "restart", "isthmus-xjob")
        eventually(lambda: there.compute.find_flavor(fid, ignore_missing=True), what=f"flavor {fid} in {region}")
        eventually(lambda: there.compute.fetch_flavor_extra_specs(fid).extra_specs.get("isthmus:test") == "resynced",
                   what="its extra spec")
        time.sleep(6)  # one more resync tick
        assert there.compute.find_flavor(local_fid, ignore_missing=True) is not None
    finally:
        override.unlink()
        sandbox_cli(gw.sandbox, "sandbox", "restart", "isthmus-xjob")
        for conn in (at_master, there):
            for flavor in (fid, local_fid):
                conn.compute.delete_flavor(flavor, ignore_missing=True)


def test_a_users_keypair_write_never_touches_another_users_keypair(gw):
    """Issue 26 item 4, as reproduced: a non-admin's ``POST /os-keypairs?user_id=<admin>``
    through the gateway removed the admin's same-named keypair in RegionTwo."""
    from tests.integration.helpers import job_of

    region, _ = _other_region(gw)
    key_name = name("gw-kp")
    there = gw.sandbox.connect(region, cloud="isthmus-admin")
    admin_id = there.current_user_id
    public = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH0nrMxFuUDg2QUlY5W3nTFaDXw/ZRcEMZ8CqnMd9gzx admin"
    there.compute.create_keypair(name=key_name, public_key=public)
    try:
        made = gw.call("POST", f"/os-keypairs?user_id={admin_id}", json={"keypair": {"name": key_name}})
        assert made.status_code in (200, 201), made.text
        owner = made.json()["keypair"]["user_id"]
        assert owner != admin_id
        eventually(lambda: job_of(gw.sandbox, "gateway_keypair_sync", f"{owner}/{key_name}"),
                   what="the sync job of the caller's own keypair")
        assert job_of(gw.sandbox, "gateway_keypair_sync", f"{admin_id}/{key_name}") is None
        assert there.compute.find_keypair(key_name, ignore_missing=True) is not None
    finally:
        gw.call("DELETE", f"/os-keypairs/{key_name}")
        there.compute.delete_keypair(key_name, ignore_missing=True)
