"""The sandbox dataplane: servers are namespaces, wired only from what
each region's Neutron API says; pings cross regions over VXLAN.

Runs when the sandbox was started with ``--dataplane`` (tests/conftest.py does,
where the machine allows it); the third-region case needs a sandbox with three
regions (``isthmus sandbox up --dataplane --regions RegionOne,RegionTwo,RegionThree``).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from isthmus.network import SHADOW_OWNER
from isthmus.sandbox.dataplane import names
from isthmus.sandbox.layout import Layout
from tests.integration.helpers import CENTRAL, delete_network, eventually, sandbox_layout
from tests.integration.tour import shared_tour
from tests.sandboxes import BIN, free_base_port, isthmus

pytestmark = pytest.mark.integration

PING_DEADLINE = 180  # seconds: shadows come from the job worker, on two busy cores


@pytest.fixture
def layout(sandbox) -> Layout:
    layout = sandbox_layout(sandbox.state_dir)
    if not layout.dataplane:
        pytest.skip("the sandbox runs without --dataplane (needs root)")
    return layout


def boot_all(sandbox, name: str, network_id: str, regions) -> dict:
    """One server per region on the network, ACTIVE (booted concurrently)."""
    started = {}
    for region in regions:
        conn = sandbox.connect(region)
        image = conn.image.find_image("tiny", ignore_missing=False)
        flavor = conn.compute.find_flavor("m1.tiny", ignore_missing=False)
        # Nova's name filter is a pattern: servers(name=name) finds these for clean-up.
        started[region] = conn.compute.create_server(name=f"{name}-{region}", image_id=image.id, flavor_id=flavor.id,
                                                     networks=[{"uuid": network_id}])
    return {r: sandbox.connect(r).compute.wait_for_server(s, wait=300) for r, s in started.items()}


def port_of(admin, region, server):
    (port,) = list(admin[region].network.ports(device_id=server.id))
    return port


def sandbox_exec(sandbox, server_id: str, *command: str) -> subprocess.CompletedProcess:
    return isthmus("sandbox", "exec", "--state-dir", str(sandbox.state_dir), server_id, "--", *command,
                   check=False, timeout=60)


def pings(sandbox, server_id: str, address: str) -> bool:
    return sandbox_exec(sandbox, server_id, "ping", "-c", "1", "-W", "1", address).returncode == 0


def ip_of(port) -> str:
    return port.fixed_ips[0]["ip_address"]


def wait_ping(sandbox, source, target_ip: str, timeout: float = PING_DEADLINE) -> float:
    started = time.monotonic()
    eventually(lambda: pings(sandbox, source.id, target_ip), timeout=timeout, interval=0.5,
               what=f"ping from {source.name} ({source.id}) to {target_ip}")
    return time.monotonic() - started


def host_fdb(layout: Layout, region: str) -> list[dict]:
    """The forwarding entries of the VXLAN devices in a region's host namespace."""
    out = subprocess.run(["bridge", "-n", names.host_namespace(layout, region), "-j", "fdb", "show"],
                         capture_output=True, text=True, check=True).stdout
    # The VXLAN devices' own entries (where a MAC is tunnelled to), not what the bridge learned.
    return [e for e in json.loads(out or "[]") if (e.get("ifname") or "").startswith("vxlan-") and e.get("dst")]


@dataclass
class Pair:
    """A central network with a server in each of the first two regions."""

    network: object
    subnet: object
    servers: dict  # region -> server
    ports: dict  # region -> the server's port (as that region's admin sees it)


@pytest.fixture(scope="module")
def pair(sandbox):
    """Shared by the tests below (each boot costs seconds on two cores); each test
    leaves the two servers pinging each other again."""
    layout = sandbox_layout(sandbox.state_dir)
    if not layout.dataplane:
        pytest.skip("the sandbox runs without --dataplane (needs root)")
    central = sandbox.connect(CENTRAL)
    name = f"dp-{uuid.uuid4().hex[:8]}"
    net = central.network.create_network(name=name)
    subnet = central.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.78.0.0/24", name=name)
    try:
        servers = boot_all(sandbox, name, net.id, sandbox.regions[:2])
        admin = {r: sandbox.connect(r, cloud="isthmus-admin") for r in sandbox.regions}
        yield Pair(net, subnet, servers, {r: port_of(admin, r, s) for r, s in servers.items()})
    finally:
        for region in sandbox.regions:
            conn = sandbox.connect(region)
            for server in list(conn.compute.servers(name=name)):
                conn.compute.delete_server(server)
                conn.compute.wait_for_delete(server, wait=120)
        eventually(lambda: delete_network(central, net.id), timeout=60, what=f"delete of network {net.id}")


def host_arp(layout: Layout, region: str) -> set[str]:
    """The addresses the VXLAN devices of a region's host namespace answer ARP for."""
    out = subprocess.run(["ip", "-n", names.host_namespace(layout, region), "-j", "neigh", "show", "nud", "permanent"],
                         capture_output=True, text=True, check=True).stdout
    return {e["dst"] for e in json.loads(out or "[]") if (e.get("dev") or "").startswith("vxlan-")}


def test_servers_in_two_regions_ping_each_other_with_neutrons_mac_and_ip(sandbox, layout, admin, pair):
    one, two = sandbox.regions[:2]
    wait_ping(sandbox, pair.servers[one], ip_of(pair.ports[two]))
    wait_ping(sandbox, pair.servers[two], ip_of(pair.ports[one]))

    # The server's interface carries its port's MAC and IP, and routes to the subnet's gateway.
    links = json.loads(sandbox_exec(sandbox, pair.servers[one].id, "ip", "-j", "addr", "show").stdout)
    (eth,) = [link for link in links if link["ifname"] != "lo"]
    assert eth["address"] == pair.ports[one].mac_address
    assert [a["local"] for a in eth["addr_info"] if a["family"] == "inet"] == [ip_of(pair.ports[one])]
    routes = json.loads(sandbox_exec(sandbox, pair.servers[one].name, "ip", "-j", "route", "show", "default").stdout)
    assert [r["gateway"] for r in routes] == [admin[one].network.get_subnet(pair.subnet.id).gateway_ip]
    # (the route was read by name: exec takes a name or an id.) An unknown server is one clear line.
    missing = sandbox_exec(sandbox, pair.network.name + "-nobody", "true")
    assert missing.returncode != 0 and missing.stderr.strip().count("\n") == 0


def test_a_server_in_a_third_region_joins_and_pings_both(sandbox, layout, admin, pair):
    if len(sandbox.regions) < 3:
        pytest.skip("needs a sandbox with three regions")
    third = sandbox.regions[2]
    server = boot_all(sandbox, pair.network.name, pair.network.id, (third,))[third]
    port = port_of(admin, third, server)
    for region in sandbox.regions[:2]:
        wait_ping(sandbox, server, ip_of(pair.ports[region]))
        wait_ping(sandbox, pair.servers[region], ip_of(port))
    sandbox.connect(third).compute.delete_server(server)


def test_a_shadow_deleted_by_hand_breaks_the_ping_until_drift_repair(sandbox, layout, admin, pair):
    one, two = sandbox.regions[:2]
    remote = pair.ports[two]
    wait_ping(sandbox, pair.servers[one], ip_of(remote))

    # The shadow of RegionTwo's port in RegionOne has that port's UUID. The worker's
    # periodic resync may remake it before the break is seen: then delete it again.
    broke = False
    for _ in range(3):
        deleted_at = time.monotonic()
        admin[one].network.delete_port(remote.id)
        broke = _first(lambda: not pings(sandbox, pair.servers[one].id, ip_of(remote)), timeout=20)
        if broke:
            break
    assert broke, "the ping never failed after the shadow was deleted"
    wait_ping(sandbox, pair.servers[one], ip_of(remote))
    print(f"\ndrift repair: shadow deleted by hand -> ping answered again after {time.monotonic() - deleted_at:.1f}s")
    shadow = admin[one].network.get_port(remote.id)
    assert shadow.device_owner == SHADOW_OWNER and shadow.mac_address == remote.mac_address


def test_a_shadow_with_a_wrong_ip_breaks_the_ping(sandbox, layout, admin, pair):
    """What the agent programs comes from Neutron: a wrong address in the shadow
    (as Isthmus could write one) leaves the remote server unreachable."""
    one, two = sandbox.regions[:2]
    remote = pair.ports[two]
    wait_ping(sandbox, pair.servers[one], ip_of(remote))
    # An address no port of the subnet holds in that region (a fixed one was once
    # taken by a server's port: 409 "already allocated").
    taken = {ip["ip_address"] for port in admin[one].network.ports(network_id=pair.network.id)
             for ip in port.fixed_ips}
    wrong = next(f"10.78.0.{n}" for n in range(250, 100, -1) if f"10.78.0.{n}" not in taken)
    admin[one].network.update_port(remote.id, fixed_ips=[{"subnet_id": pair.subnet.id, "ip_address": wrong}])
    eventually(lambda: wrong in host_arp(layout, one), timeout=60, what=f"{one}'s agent to take the wrong IP")
    # The server may still have the right answer cached from before; it asks again.
    assert sandbox_exec(sandbox, pair.servers[one].id, "ip", "neigh", "flush", "all").returncode == 0
    assert _first(lambda: not pings(sandbox, pair.servers[one].id, ip_of(remote)), timeout=30), \
        "the ping still passed with a wrong IP in the shadow"
    admin[one].network.delete_port(remote.id)  # the worker remakes it as central says
    wait_ping(sandbox, pair.servers[one], ip_of(remote))


def test_a_deleted_servers_mac_leaves_the_other_regions_forwarding_tables(sandbox, layout, admin, pair):
    one, two = sandbox.regions[:2]
    server = boot_all(sandbox, pair.network.name, pair.network.id, (two,))[two]
    gone = port_of(admin, two, server)
    wait_ping(sandbox, pair.servers[one], ip_of(gone))
    assert any(e["mac"] == gone.mac_address for e in host_fdb(layout, one))

    sandbox.connect(two).compute.delete_server(server)
    eventually(lambda: not any(e["mac"] == gone.mac_address for e in host_fdb(layout, one)),
               timeout=PING_DEADLINE, what=f"{gone.mac_address} to leave {one}'s forwarding table")
    eventually(lambda: not [ns for ns in _namespaces() if ns.endswith(server.id)], timeout=60,
               what="the deleted server's namespace to go")
    wait_ping(sandbox, pair.servers[one], ip_of(pair.ports[two]))  # the other server is untouched


def test_the_tour_prints_the_cross_region_pings(sandbox, layout):
    output = shared_tour(sandbox).output
    lines = [line for line in output.splitlines() if " -> " in line]
    n = len(sandbox.regions)
    assert len(lines) == n * (n - 1) and all("reply after" in line for line in lines), output


def test_dataplane_without_cap_net_admin_fails_in_one_line(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("drops CAP_NET_ADMIN from root's bounding set")
    base = free_base_port(45000, 2)
    result = subprocess.run(
        ["setpriv", "--bounding-set", "-net_admin", "--inh-caps", "-net_admin", str(BIN / "isthmus"),
         "sandbox", "up", "--dataplane", "--state-dir", str(tmp_path / "sb"), "--base-port", str(base)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "CAP_NET_ADMIN" in result.stderr
    assert not (tmp_path / "sb").exists()  # nothing was started


def _namespaces() -> list[str]:
    out = subprocess.run(["ip", "-j", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [e["name"] for e in json.loads(out or "[]")]


def _first(check, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.5)
    return False


# ----------------------------------------------------------------------- routers
# Central routers are carried out by router_sync (a half per region, a transit
# network between halves); each region's agent is its L3 agent: these pings
# cross router namespaces built only from the regional Neutrons' routers.
ROUTED_DEADLINE = 240  # the transit port's binding reaches central, then its shadows reach the other region


def outside_exec(sandbox, network: str, *command: str) -> subprocess.CompletedProcess:
    return isthmus("sandbox", "exec", "--state-dir", str(sandbox.state_dir), "--outside", network, "--", *command,
                   check=False, timeout=60)


def _routed_network(central, made: list, name: str, cidr: str, *hints: str):
    net = central.network.create_network(name=name, availability_zone_hints=list(hints))
    made.append(net)
    subnet = central.network.create_subnet(network_id=net.id, ip_version=4, cidr=cidr, name=name)
    return net, subnet


@pytest.fixture
def routed(sandbox, layout):
    """Networks, routers and floating IPs a test made at central (as the demo user,
    the external network as admin), and its servers, removed afterwards."""
    central = sandbox.connect(CENTRAL)
    admin_central = sandbox.connect(CENTRAL, cloud="isthmus-admin")
    made: dict[str, Any] = {"networks": [], "routers": [], "fips": [], "external": [],
                            "name": f"dpl3-{uuid.uuid4().hex[:8]}"}
    yield central, made
    for region in sandbox.regions:
        conn = sandbox.connect(region)
        for server in list(conn.compute.servers(name=made["name"])):
            conn.compute.delete_server(server)
            conn.compute.wait_for_delete(server, wait=120)
    for fip in made["fips"]:
        central.network.delete_ip(fip, ignore_missing=True)
    for router in made["routers"]:
        central.network.update_router(router.id, external_gateway_info={})
        for port in central.network.ports(device_id=router.id, device_owner="network:router_interface"):
            central.network.remove_interface_from_router(router.id, port=port.id)
        central.network.delete_router(router.id, ignore_missing=True)
    for net in made["networks"]:
        eventually(lambda: delete_network(central, net.id), timeout=120, what=f"delete of network {net.id}")  # noqa: B023 - polled within this iteration
    for net in made["external"]:
        eventually(lambda: delete_network(admin_central, net.id), timeout=120, what=f"delete of network {net.id}")  # noqa: B023 - polled within this iteration


def _boot(sandbox, region: str, name: str, network_id: str):
    return boot_all(sandbox, name, network_id, (region,))[region]


def test_servers_on_two_subnets_in_two_regions_ping_through_one_router(sandbox, layout, admin, routed):
    central, made = routed
    one, two = sandbox.regions[:2]
    net_a, sub_a = _routed_network(central, made["networks"], made["name"] + "-a", "10.79.1.0/24", one)
    net_b, sub_b = _routed_network(central, made["networks"], made["name"] + "-b", "10.79.2.0/24", two)
    router = central.network.create_router(name=made["name"])
    made["routers"].append(router)
    central.network.add_interface_to_router(router.id, subnet_id=sub_a.id)
    central.network.add_interface_to_router(router.id, subnet_id=sub_b.id)
    vm_a, vm_b = _boot(sandbox, one, made["name"], net_a.id), _boot(sandbox, two, made["name"], net_b.id)
    ip_a, ip_b = ip_of(port_of(admin, one, vm_a)), ip_of(port_of(admin, two, vm_b))

    took = wait_ping(sandbox, vm_a, ip_b, timeout=ROUTED_DEADLINE)
    wait_ping(sandbox, vm_b, ip_a, timeout=ROUTED_DEADLINE)
    print(f"\nrouted across regions: {vm_a.name} -> {ip_b} answered after {took:.1f}s")
    # Through both halves: two routers on the way (the TTL drops by two).
    trace = sandbox_exec(sandbox, vm_a.id, "ping", "-c", "1", "-W", "2", ip_b)
    assert "ttl=62" in trace.stdout, trace.stdout


@pytest.mark.exclusive
def test_a_floating_ip_answers_from_outside_and_a_server_reaches_outside(sandbox, layout, admin, routed):
    central, made = routed
    one, two = sandbox.regions[:2]
    admin_central = admin[CENTRAL].network
    ext = admin_central.create_network(name=made["name"] + "-ext", is_router_external=True,
                                       provider_network_type="flat", provider_physical_network="public",
                                       availability_zone_hints=[two])
    made["external"].append(ext)
    ext_sub = admin_central.create_subnet(network_id=ext.id, ip_version=4, cidr="172.24.61.0/24",
                                            is_dhcp_enabled=False, name=ext.name)
    net, sub = _routed_network(central, made["networks"], made["name"], "10.79.3.0/24")  # no hint
    router = central.network.create_router(name=made["name"], external_gateway_info={"network_id": ext.id})
    made["routers"].append(router)
    central.network.add_interface_to_router(router.id, subnet_id=sub.id)
    vm = _boot(sandbox, one, made["name"], net.id)
    port = port_of(admin, one, vm)
    fip = central.network.create_ip(floating_network_id=ext.id)
    made["fips"].append(fip)
    central.network.update_ip(fip, port_id=port.id)
    outside = ext_sub.gateway_ip

    started = time.monotonic()
    eventually(lambda: outside_exec(sandbox, ext.id, "ping", "-c", "1", "-W", "1",
                                    fip.floating_ip_address).returncode == 0,
               timeout=ROUTED_DEADLINE, interval=1, what=f"outside -> floating IP {fip.floating_ip_address}")
    print(f"\noutside -> floating IP {fip.floating_ip_address} ({vm.name} in {one}) after "
          f"{time.monotonic() - started:.1f}s")
    # The server answered, through both halves (TTL 64 - 2), not the gateway half itself, which holds
    # the floating address on its gateway interface and would answer with 64 were there no DNAT.
    reply = outside_exec(sandbox, ext.id, "ping", "-c", "1", "-W", "2", fip.floating_ip_address)
    assert "ttl=62" in reply.stdout, reply.stdout
    # The outside has no route to the tenant subnet: the server's ping is answered only because the
    # router NATs it (to its floating IP). exec --outside takes the network's name too.
    wait_ping(sandbox, vm, outside, timeout=ROUTED_DEADLINE)
    assert outside_exec(sandbox, ext.name, "ping", "-c", "1", "-W", "1", ip_of(port)).returncode != 0
    # Central's statuses tell the truth once the regions' L3 agents wired them (Tricircle's stayed DOWN).
    eventually(lambda: central.network.get_ip(fip.id).status == "ACTIVE", timeout=60, interval=1,
               what="the floating IP ACTIVE at central")
    statuses = {"network:router_interface": "ACTIVE", "network:router_gateway": "ACTIVE"}
    eventually(lambda: {p.device_owner: p.status for p in admin_central.ports(device_id=router.id)} == statuses,
               timeout=60, interval=1, what=lambda: "the router's interface and gateway ports ACTIVE at central: "
               f"{[(p.device_owner, p.status, p.binding_host_id) for p in admin_central.ports(device_id=router.id)]}")

    # Without the floating IP the server's address is hidden behind the gateway's (SNAT): still reachable outside,
    # and the floating address no longer answers.
    central.network.update_ip(fip, port_id=None)
    eventually(lambda: outside_exec(sandbox, ext.id, "ping", "-c", "1", "-W", "1",
                                    fip.floating_ip_address).returncode != 0,
               timeout=120, interval=1, what="the disassociated floating IP to stop answering")
    wait_ping(sandbox, vm, outside, timeout=60)
    assert central.network.get_ip(fip.id).status == "DOWN"
    eventually(lambda: all(f.status == "DOWN" for f in admin[two].network.ips(
        floating_ip_address=fip.floating_ip_address)), timeout=60, interval=1, what=f"the floating IP DOWN in {two}")
