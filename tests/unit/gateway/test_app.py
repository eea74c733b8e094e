"""The gateway against in-process fake regions: routing, lists, faults, scoping."""

import asyncio
import re
import uuid

import pytest

from tests.unit.gateway.fakes import OTHER, PROJECT

USER = {"X-Auth-Token": "user"}
ADMIN = {"X-Auth-Token": "admin"}
pytestmark = [pytest.mark.asyncio, pytest.mark.component]  # fake regions served over HTTP (tests/tiers.py)


async def test_versions_without_token_and_intersection(env):
    client, _, *_ = env
    resp = await client.get("/")
    doc = await resp.json()
    assert resp.status == 200
    v = doc["versions"][0]
    assert (v["id"], v["min_version"], v["version"]) == ("v2.1", "2.1", "2.90")
    assert (await client.post("/")).status == 404
    assert (await client.delete("/compute/")).status == 404


async def test_token_required_and_request_id(env):
    client, *_ = env
    resp = await client.get("/compute/v2.1/servers")
    assert resp.status == 401
    assert re.match(r"^req-[0-9a-f-]{36}$", resp.headers["x-openstack-request-id"])


async def test_microversion_forwarded_and_echoed(env):
    client, _, one, two, _ = env
    one.add("a")
    resp = await client.get("/compute/v2.1/servers", headers={**USER, "OpenStack-API-Version": "compute 2.30"})
    assert resp.status == 200
    assert resp.headers["OpenStack-API-Version"] == "compute 2.30"
    assert "OpenStack-API-Version" in resp.headers["Vary"]
    assert one.requests[-1][2]["OpenStack-API-Version"] == "compute 2.30"
    resp = await client.get("/compute/v2.1/servers", headers={**USER, "OpenStack-API-Version": "compute 2.95"})
    assert resp.status == 406
    assert "computeFault" in await resp.json()
    await client.get("/compute/v2.1/servers", headers=USER)
    assert one.requests[-1][2]["OpenStack-API-Version"] == "compute 2.1"


async def test_merged_pagination_with_gateway_links(env):
    client, _, one, two, _ = env
    for i in range(3):
        one.add(f"a{i}")
    for i in range(2):
        two.add(f"b{i}")
    full = await (await client.get("/compute/v2.1/servers/detail", headers=USER)).json()
    assert len(full["servers"]) == 5 and "servers_links" not in full
    got, pages = [], 0
    url: str | None = "/compute/v2.1/servers/detail?limit=2"
    while url:
        doc = await (await client.get(url, headers=USER)).json()
        pages += 1
        got += [s["id"] for s in doc["servers"]]
        nxt = [link["href"] for link in doc.get("servers_links", []) if link["rel"] == "next"]
        url = None
        if nxt:
            assert nxt[0].startswith(str(client.make_url("")).rstrip("/") + "/compute/v2.1/servers/detail?")
            url = nxt[0].split(str(client.server.port), 1)[1]
    assert pages == 3 and got == [s["id"] for s in full["servers"]]
    for s in full["servers"]:
        for link in s["links"]:
            assert link["href"].startswith(str(client.make_url("")).rstrip("/") + "/compute/"), link
        assert s["OS-EXT-AZ:availability_zone"] in ("az1", "az2")


async def test_cold_marker_uses_sort_values(env):
    client, gateway, one, two, _ = env
    for i in range(3):
        one.add(f"a{i}")
        two.add(f"b{i}")
    full = await (await client.get("/compute/v2.1/servers/detail", headers=USER)).json()
    ids = [s["id"] for s in full["servers"]]
    gateway.lists.cursors = type(gateway.lists.cursors)()  # another process: nothing cached
    doc = await (await client.get(f"/compute/v2.1/servers/detail?marker={ids[2]}&limit=2", headers=USER)).json()
    assert [s["id"] for s in doc["servers"]] == ids[3:5]


async def test_brief_list_and_filters(env):
    client, _, one, two, _ = env
    one.add("vm1")
    two.add("vm1")
    two.add("other")
    doc = await (await client.get("/compute/v2.1/servers?name=vm1", headers=USER)).json()
    assert len(doc["servers"]) == 2 and set(doc["servers"][0]) == {"id", "name", "links"}


async def test_down_region_skipped_or_503(env, tmp_path):
    client, gateway, one, two, servers = env
    a = one.add("a")
    b = two.add("b")
    await client.get("/compute/v2.1/servers", headers=USER)  # adopts both
    await servers[1].close()
    doc = await (await client.get("/compute/v2.1/servers/detail", headers=USER)).json()
    assert [s["id"] for s in doc["servers"]] == [a["id"]]
    resp = await client.get(f"/compute/v2.1/servers/{b['id']}", headers=USER)
    assert resp.status == 503
    text = await resp.text()
    assert two.base.split("//")[1] not in text and "RegionTwo" in text
    gateway.settings.strict_lists = True
    assert (await client.get("/compute/v2.1/servers/detail", headers=USER)).status == 503


async def test_routing_create_show_delete(env):
    client, gateway, one, two, _ = env
    resp = await client.post("/compute/v2.1/servers", headers=USER,
                             json={"server": {"name": "x", "availability_zone": "az2", "imageRef": "i",
                                              "flavorRef": "f", "user_data": "abc", "key_name": "k"}})
    assert resp.status == 202
    sid = (await resp.json())["server"]["id"]
    assert sid in two.servers and not one.servers
    sent = two.requests[-1]
    assert b'"user_data": "abc"' in sent[3] and b"availability_zone" not in sent[3]  # pod_az_name "" -> no AZ
    assert sent[2].get("Host", "").endswith(str(two.base.rsplit(":", 1)[1]))
    count = len(one.requests)
    show = await client.get(f"/compute/v2.1/servers/{sid}", headers=USER)
    assert show.status == 200 and (await show.json())["server"]["OS-EXT-AZ:availability_zone"] == "az2"
    assert len(one.requests) == count  # routed: RegionOne not asked
    # the project is now bound to RegionTwo: a create without AZ goes there too
    resp = await client.post("/compute/v2.1/servers", headers=USER, json={"server": {"name": "y"}})
    assert (await resp.json())["server"]["id"] in two.servers
    assert (await client.delete(f"/compute/v2.1/servers/{sid}", headers=USER)).status == 204
    assert (await client.get(f"/compute/v2.1/servers/{sid}", headers=USER)).status == 404  # gone: routing dropped
    count = len(two.requests)
    assert (await client.get(f"/compute/v2.1/servers/{sid}", headers=USER)).status == 404
    assert len(two.requests) == count
    unknown = await client.get(f"/compute/v2.1/servers/{uuid.uuid4()}", headers=USER)
    assert unknown.status == 404 and "itemNotFound" in await unknown.json()


async def test_unknown_az_is_400_and_binds_nothing(env):
    client, gateway, *_ = env
    resp = await client.post("/compute/v2.1/servers", headers=USER, json={"server": {"name": "x",
                                                                                      "availability_zone": "nope"}})
    assert resp.status == 400 and "badRequest" in await resp.json()
    assert gateway.router.bindings.list(PROJECT) == []


async def test_region_faults_pass_through_without_urls(env):
    client, _, one, *_ = env
    await client.post("/compute/v2.1/servers", headers=USER, json={"server": {"name": "x", "availability_zone": "az1"}})
    sid = next(iter(one.servers))
    resp = await client.post(f"/compute/v2.1/servers/{sid}/action", headers=USER, json={"os-stop": None})
    assert resp.status == 409 and (await resp.json())["conflictingRequest"]["message"] == "wrong state"
    one.servers.clear()
    resp = await client.get(f"/compute/v2.1/servers/{sid}", headers=USER)
    text = await resp.text()
    assert resp.status == 404 and one.base.split("//")[1] not in text


async def test_project_scoping(env):
    client, _, one, *_ = env
    assert (await client.get(f"/compute/v2.1/{OTHER}/servers", headers=USER)).status == 403
    assert (await client.get(f"/compute/v2.1/{PROJECT}/servers", headers=USER)).status == 200
    assert (await client.get(f"/compute/v2.1/{OTHER}/servers", headers=ADMIN)).status == 200


async def test_adopted_on_first_sight(env):
    client, _, one, *_ = env
    s = one.add("direct")
    assert (await client.get(f"/compute/v2.1/servers/{s['id']}", headers=USER)).status == 404
    await client.get("/compute/v2.1/servers", headers=USER)
    assert (await client.get(f"/compute/v2.1/servers/{s['id']}", headers=USER)).status == 200


async def test_availability_zones_from_registry(env):
    client, *_ = env
    doc = await (await client.get("/compute/v2.1/os-availability-zone", headers=USER)).json()
    assert [z["zoneName"] for z in doc["availabilityZoneInfo"]] == ["az1", "az2"]


async def test_other_collections_go_to_the_master(env):
    client, *_ = env
    doc = await (await client.get("/compute/v2.1/flavors", headers=USER)).json()
    assert doc["flavors"][0]["name"] == "from-RegionOne"


async def test_a_strangers_404_never_removes_the_owners_routing(env):
    """Another project's GET/PUT/DELETE of a server id answers 404 (Nova hides it);
    only an absence confirmed with service credentials may drop the routing."""
    client, gateway, one, two, _ = env
    resp = await client.post("/compute/v2.1/servers", headers=USER,
                             json={"server": {"name": "mine", "availability_zone": "az2"}})
    sid = (await resp.json())["server"]["id"]
    for method in ("get", "put", "delete"):
        stranger = await getattr(client, method)(f"/compute/v2.1/servers/{sid}", headers={"X-Auth-Token": "other"},
                                                 **({"json": {"server": {"name": "x"}}} if method == "put" else {}))
        assert stranger.status == 404
    assert await gateway.router.region_of("server", sid) == "RegionTwo"
    assert (await client.get(f"/compute/v2.1/servers/{sid}", headers=USER)).status == 200


async def test_bad_input_is_a_400_or_413_naming_it(env, tmp_path):
    client, gateway, one, two, _ = env
    resp = await client.post("/compute/v2.1/servers", headers=USER,
                             json={"server": {"name": "x", "availability_zone": ["az1"]}})
    assert resp.status == 400 and "availability_zone" in (await resp.json())["badRequest"]["message"]
    for body, field in (({"events": "x"}, "events"), ({"events": [1]}, "events[0]"),
                        ({"events": [{"server_uuid": 5}]}, "events[0].server_uuid")):
        resp = await client.post("/compute/v2.1/os-server-external-events", headers=ADMIN, json=body)
        assert resp.status == 400 and field in (await resp.json())["badRequest"]["message"], body
    big = {"server": {"name": "x", "user_data": "a" * (gateway.settings.max_request_body + 1)}}
    resp = await client.post("/compute/v2.1/servers", headers=USER, json=big)
    assert resp.status == 413 and "overLimit" in await resp.json()


async def test_a_hung_region_costs_one_timeout_then_nothing(env):
    """RegionTwo accepts and never answers: the first list waits list_timeout for
    it; after that its breaker is open and lists and routed calls to it answer at
    once, while RegionOne keeps serving."""
    import time

    client, gateway, one, two, _ = env
    one.add("a")
    s2 = two.add("b")
    await gateway.router.record("server", s2["id"], "RegionTwo", PROJECT)
    two.hang = 30.0
    started = time.monotonic()
    first = await client.get("/compute/v2.1/servers", headers=USER)
    assert first.status == 200 and time.monotonic() - started >= gateway.settings.list_timeout
    started = time.monotonic()
    again = await client.get("/compute/v2.1/servers", headers=USER)
    assert again.status == 200 and [s["name"] for s in (await again.json())["servers"]] == ["a"]
    routed = await client.get(f"/compute/v2.1/servers/{s2['id']}", headers=USER)
    assert routed.status == 503
    assert time.monotonic() - started < gateway.settings.list_timeout  # no second timeout spent on it
    assert gateway.upstream.breaker("RegionTwo", two.base).open_for() > 0
    assert not gateway.upstream.breaker("RegionOne", one.base).open_for()


def test_quota_counts_an_unreachable_region_as_last_seen_or_refuses():
    from isthmus.gateway.faults import Fault
    from isthmus.gateway.quotas import usage_across_regions

    class Reply:
        status = 200

        def __init__(self, used):
            self.used = used

        def json(self):
            return {"quota_set": {"instances": {"in_use": self.used, "reserved": 0}}}

    watched = {"instances": 10}
    scope = ("compute", "p-quota-test")
    regions = ["RegionOne", "RegionTwo"]
    seen: dict = {}
    assert usage_across_regions(regions, [Reply(2), Reply(3)], watched, "last_known", scope, seen) == {"instances": 5}
    down = [Reply(2), TimeoutError("hung")]
    assert usage_across_regions(regions, down, watched, "last_known", scope, seen) == {"instances": 5}
    with pytest.raises(Fault) as err:
        usage_across_regions(regions, down, watched, "refuse", scope, seen)
    assert err.value.status == 503 and "RegionTwo" in err.value.message


async def test_version_probes_are_single_flight(env):
    """Many requests on a cold cache probe each region once, not once each."""
    import asyncio

    client, gateway, one, two, _ = env
    gateway.versions._ranges.clear()
    await asyncio.gather(*(client.get("/compute/v2.1/servers", headers=USER) for _ in range(10)))
    probes = [r for r in one.requests if r[1] == "/"]  # GET of the service root
    assert len(probes) == 1


async def test_after_the_cooldown_one_trial_call_goes_to_a_hung_region_not_every_waiting_caller(env):
    client, gateway, one, two, _ = env
    gateway.upstream._cooldown = 0.5
    s2 = two.add("b")
    await gateway.router.record("server", s2["id"], "RegionTwo", PROJECT)
    two.hang = 30.0
    assert (await client.get(f"/compute/v2.1/servers/{s2['id']}", headers=USER)).status == 503
    await asyncio.sleep(0.6)  # the cooldown is over
    before = two.arrived
    replies = await asyncio.gather(*(client.get(f"/compute/v2.1/servers/{s2['id']}", headers=USER)
                                     for _ in range(6)))
    assert [r.status for r in replies] == [503] * 6
    assert two.arrived - before == 1  # the trial; the others failed fast while it hung
    two.hang = 0.0
    await asyncio.sleep(0.6)
    assert (await client.get(f"/compute/v2.1/servers/{s2['id']}", headers=USER)).status == 200  # closed again
    assert not gateway.upstream.breaker("RegionTwo", two.base).open_for()


async def test_a_large_reply_is_streamed_with_its_links_rewritten(env):
    client, gateway, one, two, _ = env
    one.extra_flavors = 3000  # some 300 KB of JSON
    gateway.settings.stream_replies_over = 64 * 1024
    resp = await client.get("/compute/v2.1/flavors", headers=USER)
    assert resp.status == 200 and "Content-Length" not in resp.headers  # chunked, never held whole
    doc = await resp.json()
    assert len(doc["flavors"]) == 3001
    base = str(client.make_url("")).rstrip("/")
    hrefs = [f["links"][0]["href"] for f in doc["flavors"][1:]]
    assert all(h.startswith(base + "/compute/v2.1/flavors/f") for h in hrefs), hrefs[:3]
    assert (await client.get(f"/compute/v2.1/servers/{uuid.uuid4()}", headers=USER)).status == 404  # slot given back


async def test_an_expired_version_cache_is_refreshed_behind_requests_not_in_them(env):
    """A hung region's probe timeout is never added to a request once ranges are known."""
    client, gateway, one, two, _ = env
    assert (await client.get("/compute/v2.1/servers", headers=USER)).status == 200  # first probe, waited for
    api = next(iter(gateway.versions._ranges))
    at, ranges = gateway.versions._ranges[api]
    gateway.versions._ranges[api] = (at - 10 * gateway.settings.catalog_ttl, ranges)  # expired
    two.hang = 30.0
    before = two.arrived
    resp = await client.get("/compute/v2.1/os-availability-zone", headers=USER)  # asks no region itself
    assert resp.status == 200
    await asyncio.sleep(0.2)
    assert two.arrived > before  # the refresh went out...
    assert not gateway.versions._refreshing[api].done()  # ...and is still waiting on the hung region


async def test_a_volume_in_another_region_is_named_only_to_who_may_see_it(env):
    """Issue 26 item 5: attaching another project's volume (in another region) to
    one's server answered 400 "not in the same region": proof that the id exists.
    A stranger now gets the 404 the region would give; its owner the 400."""
    client, gateway, one, two, _ = env
    mine = one.add("mine")
    await gateway.router.record("server", mine["id"], "RegionOne", PROJECT)
    theirs, ours = "11111111-2222-3333-4444-555555555555", "66666666-7777-8888-9999-000000000000"
    await gateway.router.record("volume", theirs, "RegionTwo", OTHER)
    await gateway.router.record("volume", ours, "RegionTwo", PROJECT)
    path = f"/compute/v2.1/servers/{mine['id']}/os-volume_attachments"
    stranger = await client.post(path, headers=USER, json={"volumeAttachment": {"volumeId": theirs}})
    assert stranger.status == 404 and "could not be found" in await stranger.text()
    owner = await client.post(path, headers=USER, json={"volumeAttachment": {"volumeId": ours}})
    assert owner.status == 400 and "same region" in await owner.text()


async def test_external_events_for_unknown_servers_answer_as_nova(env):
    """Issue 26 item 5: a non-admin got our 404 (no such servers) before Nova's 403."""
    client, gateway, one, two, _ = env
    body = {"events": [{"name": "network-changed", "server_uuid": "00000000-0000-0000-0000-000000000000"}]}
    resp = await client.post("/compute/v2.1/os-server-external-events", headers=USER, json=body)
    assert resp.status == 404 and "No instances found" not in await resp.text()
    assert any(r[1].endswith("/os-server-external-events") for r in one.requests)  # the master answered
