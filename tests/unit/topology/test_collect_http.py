"""The collector over a real keystoneauth session (catalogue lookup by region and
interface, query parameters, paging by absolute next links) against a local HTTP
server that answers with the fixture's recorded JSON."""

from __future__ import annotations

import json
import threading
import urllib.parse
from wsgiref import simple_server

import pytest
from keystoneauth1 import access, fixture, session
from keystoneauth1.identity import access as access_plugin

from isthmus.topology import collect
from tests.unit.topology import fixtures as fx

pytestmark = pytest.mark.component  # an HTTP server or headless Chromium (tests/tiers.py)


class Quiet(simple_server.WSGIRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def cloud():
    """A server answering every region's Neutron and Nova and the Admin API by path prefix."""
    snap = fx.snapshot()
    regions = {r.name: r for r in [snap.central, *snap.regions]}
    seen: list[str] = []

    def app(environ, start_response):
        path, query = environ["PATH_INFO"], urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
        seen.append(f"{path}?{environ.get('QUERY_STRING', '')}")
        prefix, _, rest = path.lstrip("/").partition("/")
        body: object = None
        if prefix == "admin" and rest == "v1.0/pods":
            body = {"pods": snap.pods}
        elif prefix == "admin" and rest == "v1.0/jobs/detail":
            body = {"jobs": [j for j in snap.jobs or [] if j["status"].lower() == query["status"][0]]}
        elif prefix in regions:
            region = regions[prefix]
            ports = region.ports or []
            if rest == "v2.0/ports" and "marker" not in query:  # page one: one port and a next link
                base = f"http://{environ['HTTP_HOST']}/{prefix}/v2.0/ports?marker={ports[0]['id']}"
                body = {"ports": ports[:1], "ports_links": [{"rel": "next", "href": base}]}
            elif rest == "v2.0/ports":
                body = {"ports": ports[1:]}
            elif rest in ("v2.0/networks", "v2.0/routers"):
                body = {rest[5:]: getattr(region, rest[5:])}
            elif rest == "compute/servers/detail" and query.get("all_tenants") == ["True"]:
                body = {"servers": region.servers}
        status = "200 OK" if body is not None else "404 Not Found"
        data = json.dumps(body if body is not None else {"error": path}).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]

    server = simple_server.make_server("127.0.0.1", 0, app, handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}"
    token = fixture.V3Token()
    token.set_project_scope()
    for name in regions:
        token.add_service("network").add_standard_endpoints(public=f"{url}/{name}", region=name)
        if name != "CentralRegion":
            token.add_service("compute").add_standard_endpoints(public=f"{url}/{name}/compute", region=name)
    token.add_service("multiregion").add_standard_endpoints(public=f"{url}/admin", region="CentralRegion")
    auth = access_plugin.AccessInfoPlugin(access.create(body=token, auth_token="tok"))
    yield session.Session(auth=auth), seen
    server.shutdown()
    server.server_close()


def test_collects_the_tour_over_http(cloud) -> None:
    sess, seen = cloud
    topo = collect.Collector(sess, timeout=5).topology()
    assert [r.name for r in topo.regions] == ["CentralRegion", "RegionOne", "RegionTwo"]
    assert all(r.healthy for r in topo.regions), [r.errors for r in topo.regions]
    two = topo.networks[0].copies["RegionTwo"]
    assert [p.id for p in two.servers] == [fx.PORT2] and [p.id for p in two.shadows] == [fx.PORT1]
    assert two.servers[0].server_name == "tour-regiontwo"
    assert topo.jobs.backlog == 1 and len(topo.jobs.failed) == 1
    assert any(s.startswith("/RegionOne/v2.0/ports?marker=") for s in seen)  # followed the next link
    assert "/admin/v1.0/jobs/detail?status=fail&limit=500" in seen


def test_a_region_missing_from_the_catalogue_is_unhealthy(cloud) -> None:
    sess, _ = cloud
    collector = collect.Collector(sess, timeout=5)
    snap = collector.snapshot()
    broken = collect.RegionSnapshot("RegionThree")
    collect.read_neutron(collector.reader("network", "RegionThree"), broken)
    assert broken.networks is None and "EndpointNotFound" in broken.errors["network"]
    assert snap.central.networks is not None
