"""Bad input to the Isthmus Neutron plugins: every rejected request is a
4xx whose message names the field or value at fault; none is a 500.

Requests go as raw REST calls, so the status and fault text are what a client sees."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.integration.helpers import delete_user_ports, service_connection

pytestmark = pytest.mark.integration

CENTRAL = "CentralRegion"


@dataclass(frozen=True)
class Bad:
    what: str
    region: str  # CENTRAL, or "R1" for the first region
    method: str
    path: Callable[[dict], str]
    body: Callable[[dict], dict[str, Any]]
    status: int
    names: tuple[str | Callable[[dict], str], ...]  # each must appear in the fault message
    cloud: str = "isthmus-demo"  # or SERVICE: the user regions report bindings as


MISSING = "8e9c4d3c-0000-4000-8000-000000000000"
SERVICE = "service"
CASES = [
    Bad("unknown AZ hint", CENTRAL, "POST", lambda x: "/networks",
        lambda x: {"network": {"name": "bad", "availability_zone_hints": ["nowhere-az"]}}, 404, ("nowhere-az",)),
    Bad("hints not a list", CENTRAL, "POST", lambda x: "/networks",
        lambda x: {"network": {"name": "bad", "availability_zone_hints": "az1"}}, 400, ("availability_zone_hints",)),
    Bad("hints changed after create", CENTRAL, "PUT", lambda x: f"/networks/{x['net']}",
        lambda x: {"network": {"availability_zone_hints": ["az2"]}}, 400, ("availability_zone_hints",)),
    Bad("provider segment changed", CENTRAL, "PUT", lambda x: f"/networks/{x['net']}",
        lambda x: {"network": {"provider:segmentation_id": 4242}}, 400, ("provider",), cloud="isthmus-admin"),
    Bad("external flag changed", CENTRAL, "PUT", lambda x: f"/networks/{x['net']}",
        lambda x: {"network": {"router:external": True}}, 400, ("router:external",), cloud="isthmus-admin"),
    Bad("overlapping subnet", CENTRAL, "POST", lambda x: "/subnets",
        lambda x: {"subnet": {"network_id": x["net"], "ip_version": 4, "cidr": "10.79.0.128/25"}}, 400,
        ("10.79.0.128/25", "overlaps")),
    Bad("fixed IP already in use", CENTRAL, "POST", lambda x: "/ports",
        lambda x: {"port": {"network_id": x["net"], "fixed_ips": [{"ip_address": x["dhcp_ip"]}]}}, 409,
        (lambda x: x["dhcp_ip"],)),
    Bad("fixed IP outside the subnet", CENTRAL, "POST", lambda x: "/ports",
        lambda x: {"port": {"network_id": x["net"], "fixed_ips": [{"subnet_id": x["subnet"],
                                                                     "ip_address": "192.0.2.7"}]}}, 400,
        ("192.0.2.7",)),
    Bad("garbage isthmus binding report", CENTRAL, "POST", lambda x: "/ports",
        lambda x: {"port": {"network_id": x["net"], "binding:host_id": "h",
                            "binding:profile": {"isthmus": "not-a-dict"}}}, 201, (), cloud=SERVICE),
    Bad("report naming an unknown region", CENTRAL, "POST", lambda x: "/ports",
        lambda x: {"port": {"network_id": x["net"], "binding:host_id": "h",
                            "binding:profile": {"isthmus": {"region": "Atlantis", "vif_type": "ovs"}}}}, 201, (),
        cloud=SERVICE),
    Bad("regional port with central's DHCP address", "R1", "POST", lambda x: "/ports",
        lambda x: {"port": {"network_id": x["net"], "fixed_ips": [{"ip_address": x["dhcp_ip"]}]}}, 409,
        (lambda x: x["dhcp_ip"],)),
    Bad("regional port on an unknown network", "R1", "POST", lambda x: "/ports",
        lambda x: {"port": {"network_id": MISSING}}, 404, (MISSING,)),
    Bad("regional port with an unknown security group", "R1", "POST", lambda x: "/ports",
        lambda x: {"port": {"network_id": x["net"], "security_groups": [MISSING]}}, 404, (MISSING,)),
    Bad("regional port with a MAC in use", "R1", "POST", lambda x: "/ports",
        lambda x: {"port": {"network_id": x["net"], "mac_address": x["dhcp_mac"]}}, 409,
        (lambda x: x["dhcp_mac"],)),
    Bad("regional port with a malformed address", "R1", "POST", lambda x: "/ports",
        lambda x: {"port": {"network_id": x["net"], "fixed_ips": [{"ip_address": "10.79.0.999"}]}}, 400,
        ("10.79.0.999",)),
    Bad("regional port on a network hinted elsewhere", "R1", "POST", lambda x: "/ports",
        lambda x: {"port": {"network_id": x["elsewhere"]}}, 404, (lambda x: x["elsewhere"],)),
    Bad("regional rule naming an unknown remote group", "R1", "POST", lambda x: "/security-group-rules",
        lambda x: {"security_group_rule": {"security_group_id": x["sg"], "direction": "ingress",
                                           "remote_group_id": MISSING}}, 404, (MISSING,)),
    # Issue 17 (found by the fuzz tier): no id reached the local plugin as None; stock answers 404.
    Bad("regional PUT on the network collection", "R1", "PUT", lambda x: "/networks",
        lambda x: {"network": {"name": "x"}}, 404, ("Network None could not be found",)),
    Bad("regional DELETE on the network collection", "R1", "DELETE", lambda x: "/networks",
        lambda x: {}, 404, ("Network None could not be found",)),
    # An id of "..": once read from central as a URL, it named the collection.
    Bad("regional subnet id '..'", "R1", "GET", lambda x: "/subnets/%2E%2E", lambda x: {}, 404, ("..",)),
]


@pytest.fixture(scope="module")
def objects(sandbox):
    demo = sandbox.connect(CENTRAL)
    suffix = uuid.uuid4().hex[:6]
    net = demo.network.create_network(name=f"bad-{suffix}")
    subnet = demo.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.79.0.0/24")
    elsewhere = demo.network.create_network(name=f"bad-else-{suffix}",
                                            availability_zone_hints=[sandbox.regions[1]])
    sg = demo.network.create_security_group(name=f"bad-{suffix}")
    dhcp = next(demo.network.ports(network_id=net.id, device_owner="network:dhcp"))
    yield {"net": net.id, "subnet": subnet.id, "elsewhere": elsewhere.id, "sg": sg.id,
           "dhcp_ip": dhcp.fixed_ips[0]["ip_address"], "dhcp_mac": dhcp.mac_address}
    admin = sandbox.connect(CENTRAL, cloud="isthmus-admin")
    delete_user_ports(admin, net.id)
    for obj in (net, elsewhere):
        admin.network.delete_network(obj.id, ignore_missing=True)
    admin.network.delete_security_group(sg.id, ignore_missing=True)


def _connect(sandbox, region: str, cloud: str):
    # binding:profile is the service role's (Neutron's policy): the regions' user.
    return service_connection(sandbox, region) if cloud == SERVICE else sandbox.connect(region, cloud=cloud)


@pytest.mark.parametrize("case", CASES, ids=[c.what for c in CASES])
def test_bad_input_is_a_4xx_naming_what_is_wrong(sandbox, objects, case):
    region = sandbox.regions[0] if case.region == "R1" else case.region
    conn = _connect(sandbox, region, case.cloud)
    reply = conn.network.request(case.path(objects), case.method, json=case.body(objects),
                                 headers={"Accept": "application/json"}, raise_exc=False)
    assert reply.status_code == case.status, reply.text
    if case.status == 201:  # accepted and harmless: the plugins did not fall over
        conn.network.delete_port(reply.json()["port"]["id"])
        return
    fault = reply.json()["NeutronError"]["message"]
    for name in case.names:
        assert (name(objects) if callable(name) else name) in fault, fault
