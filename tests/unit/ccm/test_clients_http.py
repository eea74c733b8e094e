"""The real openstacksdk path against a tiny in-process Nova/Neutron stand-in.

Checks what stubs cannot: per-region endpoint choice from the catalog, version
discovery, and that HTTP 404 / 500 / refused connections become None /
RegionError as the search logic expects.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from keystoneauth1 import fixture, session

from isthmus.ccm.errors import InstanceNotFound, RegionError
from isthmus.ccm.openstack.clients import OpenStackClients, RegionBreaker
from isthmus.ccm.openstack.instances import Instances, NodeRef

from .test_clients import StaticAuth

pytestmark = pytest.mark.component  # a Kubernetes API (kmock) or HTTP servers in threads (tests/tiers.py)

SERVER = {"id": "i1", "name": "node-1", "status": "ACTIVE", "OS-EXT-AZ:availability_zone": "az 2",
          "flavor": {"original_name": "m1.small"}, "addresses": {}, "metadata": {}}


class Handler(BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, Any]] = {}
    seen: list[str] = []
    stall: dict[str, float] = {}  # path prefix -> seconds to sleep before answering

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.seen.append(self.path)
        for prefix, seconds in self.stall.items():
            if self.path.startswith(prefix):
                time.sleep(seconds)
        base = f"http://{self.headers['Host']}"
        path = self.path.split("?")[0].rstrip("/")
        body: dict[str, Any]
        if path.endswith("/v2.1"):
            status, body = 200, {"version": {"id": "v2.1", "status": "CURRENT", "min_version": "2.1",
                                             "version": "2.90", "links": [{"rel": "self", "href": base + path + "/"}]}}
        elif path.endswith("/network"):
            status, body = 200, {"versions": [{"id": "v2.0", "status": "CURRENT",
                                               "links": [{"rel": "self", "href": base + path + "/v2.0/"}]}]}
        else:
            status, body = self.routes.get(path, (404, {"itemNotFound": {"code": 404, "message": "not found"}}))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    Handler.routes, Handler.seen, Handler.stall = {}, [], {}
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def clients_for(base: str, timeout: float = 5, breaker: RegionBreaker | None = None) -> OpenStackClients:
    token = fixture.V3Token()
    token.set_project_scope()
    compute, network = token.add_service("compute"), token.add_service("network")
    for region in ("One", "Two"):
        compute.add_standard_endpoints(public=f"{base}/{region}/compute/v2.1", region=region)
        network.add_standard_endpoints(public=f"{base}/{region}/network", region=region)
    # Three is in the catalog but nothing listens there
    compute.add_standard_endpoints(public="http://127.0.0.1:9/compute/v2.1", region="Three")
    network.add_standard_endpoints(public="http://127.0.0.1:9/network", region="Three")
    sess = session.Session(auth=StaticAuth(token), timeout=timeout)
    return OpenStackClients(sess, ("One", "Two", "Three"), breaker=breaker)


def test_lookup_over_http(server: str) -> None:
    Handler.routes["/Two/compute/v2.1/servers/i1"] = (200, {"server": SERVER})
    Handler.routes["/Two/network/v2.0/ports"] = (200, {"ports": []})
    inst = Instances(clients_for(server), ("One", "Two", "Three"), environ={"OS_CCM_REGIONAL": "true"})
    meta = inst.instance_metadata(NodeRef("node-1", "openstack:///i1"))
    assert (meta.provider_id, meta.region, meta.zone, meta.instance_type) == (
        "openstack://Two/i1", "Two", "az-2", "m1.small")
    gets = [p.split("?")[0] for p in Handler.seen if "/servers/" in p]
    assert gets == ["/One/compute/v2.1/servers/i1", "/Two/compute/v2.1/servers/i1"]


def test_500_and_refused_are_region_errors(server: str) -> None:
    Handler.routes["/One/compute/v2.1/servers/i1"] = (500, {"computeFault": {"code": 500, "message": "boom"}})
    inst = Instances(clients_for(server), ("One", "Two", "Three"))
    with pytest.raises(RegionError) as err:
        inst.instance_exists(NodeRef("n", "/i1"))
    assert err.value.region == "One"
    with pytest.raises(RegionError) as err:
        inst.instance_exists(NodeRef("n", "openstack://Three/i1"))
    assert err.value.region == "Three"
    # Two answers 404 and One/Three are skipped when the providerID names Two
    with pytest.raises(InstanceNotFound):
        inst.lookup(NodeRef("n", "openstack://Two/i1"))


def test_a_timeout_pauses_only_that_region(server: str) -> None:
    """A hung Nova costs one timeout per cooldown, not one per node; others keep answering."""
    Handler.routes["/One/compute/v2.1/servers/i1"] = (200, {"server": SERVER})
    Handler.routes["/One/network/v2.0/ports"] = (200, {"ports": []})
    now = [0.0]
    clients = clients_for(server, timeout=0.5, breaker=RegionBreaker(cooldown=30, clock=lambda: now[0]))
    inst = Instances(clients, ("One", "Two", "Three"))
    inst.instance_exists(NodeRef("warm", "openstack://Two/i0"))  # version discovery done before the stall
    Handler.stall["/Two/"] = 1.0
    now[0] += 1  # the stalled call starts after Two's last answer: hung, not busy
    started = time.monotonic()
    with pytest.raises(RegionError, match="timed out") as err:
        inst.instance_exists(NodeRef("a", "openstack://Two/i1"))
    assert err.value.region == "Two"
    asked = len(Handler.seen)
    for name in ("b", "c", "d"):
        with pytest.raises(RegionError, match="not asked for 30s more after a timeout") as err:
            inst.instance_exists(NodeRef(name, "openstack://Two/i1"))
        assert err.value.region == "Two"
        # a region-less providerID: One is asked, Two's pause is an error, never "not found"
        with pytest.raises(RegionError):
            inst.instance_exists(NodeRef(name, "/i-nowhere"))
    assert time.monotonic() - started < 2.0
    assert not any(p.startswith("/Two/") for p in Handler.seen[asked:])
    assert inst.instance_metadata(NodeRef("x", "openstack://One/i1")).region == "One"
    # after the cooldown the next call probes Two again
    del Handler.stall["/Two/"]
    now[0] += 31
    assert inst.instance_exists(NodeRef("e", "openstack://Two/i1")) is False
