"""Raw API answers of a two-region sandbox after the tour, shaped as the services
return them (Neutron v2.0, Nova v2.1, Isthmus Admin API v1.0)."""

from __future__ import annotations

import copy
from typing import Any

from isthmus.network import SHADOW_OWNER
from isthmus.topology.model import RegionSnapshot, RegionView, Snapshot, Topology

NET = "5b0e1e6c-7f5a-4c59-9a0e-5d3a7c1f0a01"
SUBNET = "0c7f0d35-3a6e-4a43-9d7c-7a9f2b3c4d02"
PORT1 = "a1111111-1111-4111-8111-111111111111"  # vm1's port, bound in RegionOne
PORT2 = "b2222222-2222-4222-8222-222222222222"  # vm2's port, bound in RegionTwo
VM1 = "c3333333-3333-4333-8333-333333333333"
VM2 = "d4444444-4444-4444-8444-444444444444"
ROUTER = "e5555555-5555-4555-8555-555555555555"
PROJECT = "f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0"


def network(**overrides: Any) -> dict[str, Any]:
    body = {
        "id": NET, "name": "tour-net", "project_id": PROJECT, "tenant_id": PROJECT, "status": "ACTIVE",
        "admin_state_up": True, "shared": False, "description": "", "mtu": 1450, "port_security_enabled": True,
        "provider:network_type": "vxlan", "provider:physical_network": None, "provider:segmentation_id": 1001,
        "router:external": False, "subnets": [SUBNET], "availability_zone_hints": [],
    }
    return {**body, **overrides}


def port(port_id: str, region: str | None, device_id: str, ip: str, mac: str, **overrides: Any) -> dict[str, Any]:
    host = f"{region.lower()}-compute" if region else ""
    profile = {"isthmus": {"region": region, "vif_type": "ovs", "vif_details": {}, "vnic_type": "normal"}} \
        if region else {}
    body = {
        "id": port_id, "name": "", "network_id": NET, "project_id": PROJECT, "mac_address": mac,
        "fixed_ips": [{"subnet_id": SUBNET, "ip_address": ip}], "device_id": device_id,
        "device_owner": "compute:az1" if region == "RegionOne" else "compute:az2", "status": "ACTIVE",
        "binding:host_id": host, "binding:profile": profile, "admin_state_up": True,
    }
    return {**body, **overrides}


def shadow(original: dict[str, Any]) -> dict[str, Any]:
    return {**original, "name": f"shadow_port_{original['id']}", "device_owner": SHADOW_OWNER,
            "device_id": "", "binding:profile": {}, "status": "ACTIVE"}


def dhcp(region: str) -> dict[str, Any]:
    return port(f"dhcp-{region}", None, "reserved_dhcp_port", "10.10.0.2", "fa:16:3e:00:00:02",
                device_owner="network:dhcp", status="ACTIVE")


def router(**overrides: Any) -> dict[str, Any]:
    body = {"id": ROUTER, "name": "r1", "project_id": PROJECT, "status": "ACTIVE", "admin_state_up": True,
            "description": "", "external_gateway_info": None, "routes": []}
    return {**body, **overrides}


def half(region: str, **overrides: Any) -> dict[str, Any]:
    return router(id=f"half-{region}", description=f"isthmus:half-of:{ROUTER}", **overrides)


def server(server_id: str, name: str) -> dict[str, Any]:
    return {"id": server_id, "name": name, "status": "ACTIVE", "tenant_id": PROJECT}


PODS = [
    {"pod_id": "p0", "region_name": "CentralRegion", "az_name": "", "pod_az_name": "", "dc_name": ""},
    {"pod_id": "p1", "region_name": "RegionOne", "az_name": "az1", "pod_az_name": "", "dc_name": ""},
    {"pod_id": "p2", "region_name": "RegionTwo", "az_name": "az2", "pod_az_name": "", "dc_name": ""},
]

JOBS = [
    {"id": "j1", "type": "port_sync", "resource_id": PORT1, "resource": {"port_id": PORT1},
     "project_id": PROJECT, "status": "NEW", "failures": 0, "last_error": None, "updated_at": "2026-12-01T10:00:00"},
    {"id": "j2", "type": "router_sync", "resource_id": ROUTER, "resource": {"router_id": ROUTER},
     "project_id": PROJECT, "status": "FAIL", "failures": 5,
     "last_error": "external network ext names no region in its availability_zone_hints",
     "updated_at": "2026-12-01T10:01:00"},
]


def snapshot() -> Snapshot:
    """The tour: vm1 in RegionOne, vm2 in RegionTwo, each shadowed in the other region;
    a router r1 with a half in each region; one pending and one failed job."""
    p1 = port(PORT1, "RegionOne", VM1, "10.10.0.11", "fa:16:3e:00:00:11")
    p2 = port(PORT2, "RegionTwo", VM2, "10.10.0.12", "fa:16:3e:00:00:12")
    central = RegionSnapshot("CentralRegion", networks=[network()], ports=[p1, p2, dhcp("central")],
                             routers=[router()])
    one = RegionSnapshot("RegionOne", networks=[network()], ports=[copy.deepcopy(p1), shadow(p2), dhcp("RegionOne")],
                         routers=[half("RegionOne")], servers=[server(VM1, "tour-regionone")])
    two = RegionSnapshot("RegionTwo", networks=[network()], ports=[copy.deepcopy(p2), shadow(p1), dhcp("RegionTwo")],
                         routers=[half("RegionTwo", external_gateway_info={"network_id": "ext"})],
                         servers=[server(VM2, "tour-regiontwo")])
    return Snapshot(central=central, regions=[one, two], pods=copy.deepcopy(PODS), jobs=copy.deepcopy(JOBS),
                    collected_at="2026-12-01T10:02:00+00:00")


def region_two_down(snap: Snapshot) -> Snapshot:
    """RegionTwo's Neutron refused connections (neutron-RegionTwo stopped)."""
    two = snap.regions[1]
    two.networks = two.ports = two.routers = None
    two.errors["network"] = "network: ConnectFailure: Unable to establish connection to http://127.0.0.1:31020"
    return snap


def region(topo: Topology, name: str) -> RegionView:
    """The region's view, which the test expects the topology to have."""
    found = topo.region(name)
    assert found is not None, f"no region {name}"
    return found
