"""Cross-region routers on the real sandbox.

Users work at CentralRegion only. ``router_sync`` makes a half of the router in
every region its networks live in, joins the halves over a transit network,
routes each subnet a half lacks to a half that has it, puts the gateway in the
external network's region and makes floating IPs there. "Servers" here are
ports created bound to a region's compute host (what Nova does), so the tests
check the API level on any machine; test_dataplane.py sends packets.
"""

from __future__ import annotations

import ipaddress
import uuid

import openstack.exceptions as os_exc
import pytest

from isthmus.network import SHADOW_OWNER
from tests.integration.helpers import CENTRAL, delete_network, eventually

pytestmark = pytest.mark.integration
HALF_TAG = "isthmus:half-of:"


def _name() -> str:
    return f"l3-{uuid.uuid4().hex[:8]}"


def _server_port(admin, region: str, network_id: str, name: str):
    """A port bound in ``region`` as Nova binds a server's (reported to central)."""
    return admin[region].network.create_port(
        network_id=network_id, name=name, binding_host_id=f"{region.lower()}-compute",
        device_owner="compute:nova", device_id=str(uuid.uuid4()))


def _half(net, router_id: str):
    """The half of ``router_id`` a region's network proxy ``net`` lists."""
    found = [r for r in net.routers() if r.description == f"{HALF_TAG}{router_id}"]
    assert len(found) <= 1, f"two halves of {router_id}: {found}"
    return found[0] if found else None


def _interfaces(net, half_id: str) -> dict[str, str]:
    """subnet id -> address of the half's interfaces."""
    return {ip["subnet_id"]: ip["ip_address"]
            for p in net.ports(device_id=half_id, device_owner="network:router_interface")
            for ip in p.fixed_ips}


def _routes(net, half_id: str) -> set[tuple[str, str]]:
    return {(r["destination"], r["nexthop"]) for r in net.get_router(half_id).routes or []}


def _reservation(admin, network_id: str, region: str, subnet_id: str) -> str:
    port = next(admin[CENTRAL].network.ports(network_id=network_id, name=f"interface_{region}_{subnet_id}"))
    return port.fixed_ips[0]["ip_address"]


def _transit_networks(admin, router_id: str) -> list:
    return list(admin[CENTRAL].network.networks(description=f"isthmus:transit-of:{router_id}"))


@pytest.fixture
def l3_cleanup(admin):
    """Everything a test made at central, removed afterwards (routers first)."""
    made: dict[str, list] = {"routers": [], "floatingips": [], "ports": [], "networks": []}
    yield made
    net = admin[CENTRAL].network
    for fip in made["floatingips"]:
        net.delete_ip(fip, ignore_missing=True)
    for router in made["routers"]:
        if net.find_router(router.id) is None:
            continue
        net.update_router(router.id, routes=[], external_gateway_info={})  # routes hold interfaces
        for port in net.ports(device_id=router.id, device_owner="network:router_interface"):
            net.remove_interface_from_router(router.id, port=port.id)
        net.delete_router(router.id, ignore_missing=True)
    for region, port in made["ports"]:
        admin[region].network.delete_port(port.id, ignore_missing=True)
    for network in made["networks"]:
        eventually(lambda: delete_network(admin[CENTRAL], network.id),  # noqa: B023 - polled within this iteration
                   timeout=60, what=f"delete of network {network.id}")


def _network(admin, made, cidr: str, *hints: str):
    net = admin[CENTRAL].network
    network = net.create_network(name=_name(), availability_zone_hints=list(hints))
    made["networks"].append(network)
    subnet = net.create_subnet(network_id=network.id, ip_version=ipaddress.ip_network(cidr).version, cidr=cidr,
                               name=network.name)
    return network, subnet


def _router_over_two_regions(admin, made, cidr_a: str, cidr_b: str):
    """A network hinted to each region, each with a bound port there, both
    subnets on one central router: ((net_a, sub_a), (net_b, sub_b), router)."""
    one, two = [r for r in admin if r != CENTRAL]
    a, b = _network(admin, made, cidr_a, one), _network(admin, made, cidr_b, two)
    made["ports"] += [(one, _server_port(admin, one, a[0].id, a[0].name)),
                      (two, _server_port(admin, two, b[0].id, b[0].name))]
    central = admin[CENTRAL].network
    router = central.create_router(name=_name(), project_id=a[0].project_id)
    made["routers"].append(router)
    for _, subnet in (a, b):
        central.add_interface_to_router(router.id, subnet=subnet.id)
    return a, b, router


def test_two_networks_in_two_regions_joined_by_one_router(sandbox, admin, l3_cleanup):
    one, two = sandbox.regions
    (net_a, sub_a), (net_b, sub_b), router = _router_over_two_regions(admin, l3_cleanup, "10.81.1.0/24", "10.81.2.0/24")
    central = admin[CENTRAL].network

    halves = {r: eventually(lambda r=r: _half(admin[r].network, router.id), what=f"half in {r}") for r in (one, two)}
    transit = eventually(lambda: _transit_networks(admin, router.id), what="transit network")[0]
    transit_ips = {}
    for region, (net, sub) in ((one, (net_a, sub_a)), (two, (net_b, sub_b))):
        conn = admin[region].network
        gateway = _reservation(admin, net.id, region, sub.id)
        eventually(lambda: _interfaces(conn, halves[region].id).get(sub.id) == gateway,  # noqa: B023 - polled within this iteration
                   what=f"{region} half on its subnet at the region's gateway {gateway}")
        (port,) = eventually(lambda: list(conn.ports(device_id=halves[region].id, network_id=transit.id)),  # noqa: B023 - polled within this iteration
                             what=f"{region} half on the transit network")
        transit_ips[region] = next(ip["ip_address"] for ip in port.fixed_ips if ":" not in ip["ip_address"])
    eventually(lambda: _routes(admin[one].network, halves[one].id) == {(sub_b.cidr, transit_ips[two])},
               what=f"{one} routes {sub_b.cidr} to {two}'s transit address")
    eventually(lambda: _routes(admin[two].network, halves[two].id) == {(sub_a.cidr, transit_ips[one])},
               what=f"{two} routes {sub_a.cidr} to {one}'s transit address")
    assert sub_b.id not in _interfaces(admin[one].network, halves[one].id)  # hinted to RegionTwo: never here

    # Extra routes are merged, never replaced: on-link where the next hop is, else via its half.
    central.update_router(router.id, routes=[{"destination": "192.168.50.0/24", "nexthop": "10.81.2.77"}])
    eventually(lambda: _routes(admin[two].network, halves[two].id) == {
        (sub_a.cidr, transit_ips[one]), ("192.168.50.0/24", "10.81.2.77")}, what=f"user route in {two}")
    eventually(lambda: _routes(admin[one].network, halves[one].id) == {
        (sub_b.cidr, transit_ips[two]), ("192.168.50.0/24", transit_ips[two])}, what=f"user route in {one}")
    central.update_router(router.id, routes=[])

    # Each delete step leaves nothing behind.
    central.remove_interface_from_router(router.id, subnet=sub_b.id)
    eventually(lambda: _half(admin[two].network, router.id) is None, what=f"{two} half removed")
    eventually(lambda: not _transit_networks(admin, router.id), what="transit network removed")
    eventually(lambda: _routes(admin[one].network, halves[one].id) == set(), what=f"{one} routes removed")
    eventually(lambda: set(_interfaces(admin[one].network, halves[one].id)) == {sub_a.id},
               what=f"{one} half keeps only its own subnet")
    central.remove_interface_from_router(router.id, subnet=sub_a.id)
    central.delete_router(router.id)
    for region in (one, two):
        eventually(lambda r=region: _half(admin[r].network, router.id) is None, what=f"no half left in {region}")
        eventually(lambda r=region: not list(admin[r].network.networks(name=f"isthmus-transit-{router.id}")),
                   what=f"no transit network copy left in {region}")



def test_ipv6_subnets_in_two_regions_route_over_the_ipv6_transit_addresses(sandbox, admin, l3_cleanup):
    """IPv6 routes the same way, without NAT: each half sends the other's /64
    to that half's IPv6 transit address."""
    one, two = sandbox.regions
    (_, sub_a), (_, sub_b), router = _router_over_two_regions(admin, l3_cleanup, "fd00:81:1::/64", "fd00:81:2::/64")
    halves = {r: eventually(lambda r=r: _half(admin[r].network, router.id), what=f"half in {r}") for r in (one, two)}
    transit = eventually(lambda: _transit_networks(admin, router.id), what="transit network")[0]
    transit_v6 = {}
    for region in (one, two):
        (port,) = eventually(lambda r=region: list(admin[r].network.ports(device_id=halves[r].id,
                                                                          network_id=transit.id)),
                             what=f"{region} half on the transit network")
        transit_v6[region] = next(ip["ip_address"] for ip in port.fixed_ips if ":" in ip["ip_address"])
    eventually(lambda: _routes(admin[one].network, halves[one].id) == {(sub_b.cidr, transit_v6[two])},
               what=f"{one} routes {sub_b.cidr} to {two}'s IPv6 transit address")
    eventually(lambda: _routes(admin[two].network, halves[two].id) == {(sub_a.cidr, transit_v6[one])},
               what=f"{two} routes {sub_a.cidr} to {one}'s IPv6 transit address")
    for region, sub in ((one, sub_a), (two, sub_b)):
        assert ipaddress.ip_address(_interfaces(admin[region].network, halves[region].id)[sub.id]) in \
            ipaddress.ip_network(sub.cidr)



def test_a_router_hinted_to_one_region_keeps_to_it(sandbox, admin, l3_cleanup):
    """A router's AZ hints name Isthmus regions or AZs; a network hinted
    elsewhere cannot join it (400 naming the field); its halves stay inside."""
    one, two = sandbox.regions
    central = admin[CENTRAL].network
    router = central.create_router(name=_name(), availability_zone_hints=[one])
    l3_cleanup["routers"].append(router)
    assert router.availability_zone_hints == [one]
    with pytest.raises(os_exc.NotFoundException, match="nowhere"):
        central.create_router(name=_name(), availability_zone_hints=["nowhere"])
    _, elsewhere = _network(admin, l3_cleanup, "10.81.7.0/24", two)
    with pytest.raises(os_exc.BadRequestException, match=f"subnet_id: .* may live in {two}"):
        central.add_interface_to_router(router.id, subnet=elsewhere.id)
    here_net, here = _network(admin, l3_cleanup, "10.81.8.0/24", one)
    l3_cleanup["ports"].append((one, _server_port(admin, one, here_net.id, here_net.name)))
    central.add_interface_to_router(router.id, subnet=here.id)
    half = eventually(lambda: _half(admin[one].network, router.id), what=f"half in {one}")
    eventually(lambda: here.id in _interfaces(admin[one].network, half.id), what=f"{one} half on the subnet")
    assert _half(admin[two].network, router.id) is None


@pytest.mark.exclusive
def test_gateway_and_floating_ip_for_a_server_in_another_region(sandbox, admin, l3_cleanup):
    one, two = sandbox.regions
    central = admin[CENTRAL].network
    ext = central.create_network(name=_name(), is_router_external=True, provider_network_type="flat",
                                 provider_physical_network="public", availability_zone_hints=[two])
    l3_cleanup["networks"].append(ext)
    ext_sub = central.create_subnet(network_id=ext.id, ip_version=4, cidr="172.24.40.0/24", is_dhcp_enabled=False,
                                    name=ext.name)
    net, sub = _network(admin, l3_cleanup, "10.82.1.0/24")  # no hint: lives wherever its servers are
    server_port = _server_port(admin, one, net.id, net.name)
    l3_cleanup["ports"].append((one, server_port))
    router = central.create_router(name=_name(), project_id=net.project_id,
                                   external_gateway_info={"network_id": ext.id})
    l3_cleanup["routers"].append(router)
    central.add_interface_to_router(router.id, subnet=sub.id)
    gateway_ip = router.external_gateway_info["external_fixed_ips"][0]["ip_address"]

    gw_half = eventually(lambda: _half(admin[two].network, router.id), what=f"half in {two}")
    eventually(lambda: (admin[two].network.get_router(gw_half.id).external_gateway_info or {}).get(
        "external_fixed_ips", [{}])[0].get("ip_address") == gateway_ip,
        what=f"{two} half's gateway at central's address {gateway_ip}")
    half_one = eventually(lambda: _half(admin[one].network, router.id), what=f"half in {one}")
    eventually(lambda: any(d == "0.0.0.0/0" for d, _ in _routes(admin[one].network, half_one.id)),
               what=f"{one}'s default route towards {two}")

    fip = central.create_ip(floating_network_id=ext.id, project_id=net.project_id)
    l3_cleanup["floatingips"].append(fip)
    central.update_ip(fip, port_id=server_port.id)

    def regional_fip():
        return next((f for f in admin[two].network.ips(floating_ip_address=fip.floating_ip_address)), None)

    made = eventually(lambda: (f := regional_fip()) is not None and f.port_id == server_port.id and f,
                      what=f"floating IP {fip.floating_ip_address} in {two} on the {one} server's port")
    assert made.fixed_ip_address == server_port.fixed_ips[0]["ip_address"]
    shadow = admin[two].network.get_port(server_port.id)
    assert shadow.device_owner == SHADOW_OWNER and shadow.mac_address == server_port.mac_address

    central.update_ip(fip, port_id=None)
    eventually(lambda: regional_fip() is None, what="regional floating IP gone after disassociation")
    central.update_ip(fip, port_id=server_port.id)
    eventually(regional_fip, what="regional floating IP back")
    central.delete_ip(fip)
    eventually(lambda: regional_fip() is None, what="regional floating IP gone after delete")

    central.update_router(router.id, external_gateway_info={})
    eventually(lambda: not admin[two].network.get_router(gw_half.id).external_gateway_info,
               what=f"{two} half's gateway cleared")
    eventually(lambda: not any(d == "0.0.0.0/0" for d, _ in _routes(admin[one].network, half_one.id)),
               what=f"{one}'s default route removed")
    assert ext_sub.id


def _sandbox(sandbox, *args: str):
    from tests.sandboxes import isthmus

    return isthmus(*args[:2], "--state-dir", str(sandbox.state_dir), *args[2:])


@pytest.mark.exclusive
def test_a_region_down_during_router_changes_blocks_no_other(sandbox, admin, l3_cleanup):
    one, two = sandbox.regions
    (net_a, sub_a), (net_b, sub_b), router = _router_over_two_regions(admin, l3_cleanup, "10.83.1.0/24", "10.83.2.0/24")
    central = admin[CENTRAL].network
    halves = {r: eventually(lambda r=r: _half(admin[r].network, router.id), what=f"half in {r}") for r in (one, two)}
    eventually(lambda: len(_routes(admin[two].network, halves[two].id)) == 1, what=f"{two} routes")
    transit_one = next(iter(_routes(admin[two].network, halves[two].id)))[1]

    _sandbox(sandbox, "sandbox", "stop", f"neutron-{two}")
    try:
        central.update_router(router.id, routes=[{"destination": "192.168.60.0/24", "nexthop": "10.83.1.99"}])
        eventually(lambda: ("192.168.60.0/24", "10.83.1.99") in _routes(admin[one].network, halves[one].id),
                   timeout=90, what=f"{one} converges while {two} is down")
    finally:
        _sandbox(sandbox, "sandbox", "restart", f"neutron-{two}")
    admin[two] = sandbox.connect(two, cloud="isthmus-admin")

    def converged_in_two():
        try:
            return ("192.168.60.0/24", transit_one) in _routes(admin[two].network, halves[two].id)
        except os_exc.NotFoundException:  # a restarted neutron-server serves routers a moment later
            return False
        except os_exc.HttpException as err:  # ... and may answer 500 while its L3 plugin starts
            if (err.status_code or 0) < 500:
                raise
            return False

    eventually(converged_in_two, timeout=180, what=f"{two} converges once back")
    assert _half(admin[two].network, router.id).id == halves[two].id  # kept through the outage, not remade
