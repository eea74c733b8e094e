"""Cross-region networking on the real sandbox.

Networks live in CentralRegion's Neutron; regional Neutrons copy them on demand
with the same UUID, and the job worker wires shadow ports and security groups.
This part: placement, boots and L2, outages; test_networking_changes.py holds what
central changes (the two halves balance the test workers).
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import openstack.exceptions as os_exc
import pytest

from isthmus.network import SHADOW_OWNER
from tests.integration.helpers import (
    CENTRAL,
    boot,
    central_port,
    delete_network,
    enqueue_job,
    eventually,
    network_or_none,
    port_or_none,
    sandbox_cli,
    sandbox_layout,
)

pytestmark = pytest.mark.integration


# --------------------------------------------------------------------- placement

def test_unknown_availability_zone_hint_is_404_naming_it(central):
    with pytest.raises(os_exc.NotFoundException, match="nope"):
        central.network.create_network(name="bad-hints", availability_zone_hints=["nope"])


def test_hints_resolve_to_registry_zones(central):
    net = central.network.create_network(name=f"h-{uuid.uuid4().hex[:6]}", availability_zone_hints=["az1"])
    try:
        assert net.availability_zone_hints == ["az1"]
        assert central.network.get_network(net.id).availability_zones == ["az1"]
    finally:
        central.network.delete_network(net)


def test_central_create_touches_no_region_and_reserves_addresses(sandbox, central, admin):
    net = central.network.create_network(name=f"r-{uuid.uuid4().hex[:6]}")
    subnet = central.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.78.0.0/24")
    try:
        for region in sandbox.regions:
            # An unfiltered list copies nothing (a lookup by id or name would copy it).
            assert net.id not in {n.id for n in admin[region].network.networks()}
        ports = {p.name: p for p in admin[CENTRAL].network.ports(network_id=net.id)}
        dhcp = ports[f"dhcp_port_{subnet.id}"]
        assert dhcp.device_owner == "network:dhcp"
        gateways = {ports[f"interface_{r}_{subnet.id}"].fixed_ips[0]["ip_address"] for r in sandbox.regions}
        assert len(gateways) == len(sandbox.regions)
        central.network.delete_subnet(subnet)
        assert list(admin[CENTRAL].network.ports(network_id=net.id)) == []
    finally:
        central.network.delete_network(net)


def test_provider_attributes_cannot_change(admin):
    net = admin[CENTRAL].network.create_network(name=f"p-{uuid.uuid4().hex[:6]}")
    try:
        with pytest.raises(os_exc.BadRequestException):
            admin[CENTRAL].network.update_network(net, provider_segmentation_id=net.provider_segmentation_id + 1)
    finally:
        admin[CENTRAL].network.delete_network(net)


def test_unknown_ids_are_404_in_a_region_and_create_nothing(sandbox, admin):
    conn = sandbox.connect("RegionOne")
    missing = str(uuid.uuid4())
    for get in (conn.network.get_network, conn.network.get_subnet, conn.network.get_port,
                conn.network.get_security_group):
        with pytest.raises(os_exc.NotFoundException):
            get(missing)
    assert list(admin[CENTRAL].network.ports(device_id=missing)) == []


# ----------------------------------------------------------------- boots and L2

def test_servers_in_two_regions_share_one_network(sandbox, central, admin, stretched):
    net, subnet = stretched
    servers = {}
    for region in sandbox.regions:
        conn = sandbox.connect(region)
        servers[region] = conn.compute.wait_for_server(boot(conn, net.name, net.id), wait=240)
        assert servers[region].status == "ACTIVE"
    dhcp = next(admin[CENTRAL].network.ports(network_id=net.id, name=f"dhcp_port_{subnet.id}"))
    ips = set()
    for region in sandbox.regions:
        conn = admin[region]
        copy = conn.network.get_network(net.id)
        assert (copy.provider_network_type, copy.provider_segmentation_id) == (
            "vxlan", admin[CENTRAL].network.get_network(net.id).provider_segmentation_id)
        regional_subnet = conn.network.get_subnet(subnet.id)
        assert regional_subnet.cidr == subnet.cidr
        reservation = next(admin[CENTRAL].network.ports(network_id=net.id, name=f"interface_{region}_{subnet.id}"))
        assert regional_subnet.gateway_ip == reservation.fixed_ips[0]["ip_address"]
        (vm_port,) = list(conn.network.ports(device_id=servers[region].id))
        top = central_port(admin, vm_port.id)
        assert (top.mac_address, top.fixed_ips) == (vm_port.mac_address, vm_port.fixed_ips)
        assert top.binding_host_id == f"{region.lower()}-compute"
        assert top.status == "ACTIVE"
        ips.add(vm_port.fixed_ips[0]["ip_address"])
        regional_dhcp = conn.network.get_port(dhcp.id)
        assert (regional_dhcp.mac_address, regional_dhcp.fixed_ips) == (dhcp.mac_address, dhcp.fixed_ips)
    assert len(ips) == len(sandbox.regions)
    # Each region gets a shadow of the other's VM port (same UUID, IP, MAC, remote host).
    for region in sandbox.regions:
        for other in sandbox.regions:
            if other == region:
                continue
            (remote,) = list(admin[other].network.ports(device_id=servers[other].id, device_owner="compute:az"
                                                        + str(sandbox.regions.index(other) + 1)))
            shadow = eventually(lambda: port_or_none(admin[region], remote.id), what=f"shadow in {region}")  # noqa: B023 - polled within this iteration
            assert shadow.device_owner == SHADOW_OWNER
            assert (shadow.mac_address, shadow.fixed_ips) == (remote.mac_address, remote.fixed_ips)
            assert shadow.binding_host_id == f"{other.lower()}-compute"
            # The remote host has a (shadow) OVS agent here with its real tunnel IP.
            remote_agent = next(a for a in admin[other].network.agents(host=f"{other.lower()}-compute")
                                if a.agent_type == "Open vSwitch agent")
            (shadow_agent,) = [a for a in admin[region].network.agents(host=f"{other.lower()}-compute")
                               if a.agent_type == "Open vSwitch agent"]
            assert shadow_agent.configuration["tunneling_ip"] == remote_agent.configuration["tunneling_ip"]
            assert shadow_agent.configuration["isthmus_shadow_of"] == other


def test_boot_on_a_precreated_central_port(sandbox, central, admin, stretched):
    net, _ = stretched
    port = central.network.create_port(network_id=net.id, name=f"{net.name}-pre")
    conn = sandbox.connect("RegionOne")
    server = conn.compute.wait_for_server(boot(conn, net.name, port_id=port.id), wait=240)
    assert server.status == "ACTIVE"
    regional = admin["RegionOne"].network.get_port(port.id)
    assert (regional.mac_address, regional.fixed_ips) == (port.mac_address, port.fixed_ips)
    top = central_port(admin, port.id)
    assert top.device_owner.startswith("compute:")
    assert top.binding_host_id == "regionone-compute"


def test_a_regional_fixed_ip_is_allocated_at_central_or_reuses_the_callers_free_port(sandbox, central, admin,
                                                                                      stretched):
    net, subnet = stretched
    conn = sandbox.connect("RegionOne")
    fresh = conn.network.create_port(network_id=net.id, fixed_ips=[{"subnet_id": subnet.id,
                                                                     "ip_address": "10.77.0.250"}])
    top = central.network.get_port(fresh.id)  # central allocated the free address
    assert (top.mac_address, top.fixed_ips[0]["ip_address"]) == (fresh.mac_address, "10.77.0.250")
    held = central.network.create_port(network_id=net.id)
    address = held.fixed_ips[0]["ip_address"]
    copy = conn.network.create_port(network_id=net.id, fixed_ips=[{"subnet_id": subnet.id, "ip_address": address}])
    try:
        assert (copy.id, copy.mac_address) == (held.id, held.mac_address)  # the caller's own free port
    finally:
        admin["RegionOne"].network.delete_port(copy.id)
        central.network.delete_port(held, ignore_missing=True)
        conn.network.delete_port(fresh)


def test_an_explicit_fixed_ip_never_takes_over_another_projects_port(sandbox, central, admin, stretched):
    """Issue 25 hole 2: the network's owner names the address of a port of the
    project it shares the network with. Before: the owner got that port's UUID,
    MAC and project in the region, and deleting it deleted the victim at central."""
    net, subnet = stretched
    victim_project = admin[CENTRAL].current_project_id
    admin[CENTRAL].network.create_rbac_policy(object_type="network", object_id=net.id, action="access_as_shared",
                                              target_project_id=victim_project)
    victim = admin[CENTRAL].network.create_port(network_id=net.id, project_id=victim_project,
                                                port_security_enabled=False, security_group_ids=[])
    address = victim.fixed_ips[0]["ip_address"]
    conn = sandbox.connect("RegionOne")
    try:
        with pytest.raises(os_exc.ConflictException, match=address):
            conn.network.create_port(network_id=net.id, fixed_ips=[{"subnet_id": subnet.id, "ip_address": address}])
        # Nothing of the victim's was copied (a list: a read by id would copy it).
        assert victim.id not in {p.id for p in admin["RegionOne"].network.ports(network_id=net.id)}
        still = admin[CENTRAL].network.get_port(victim.id)
        assert (still.project_id, still.mac_address) == (victim_project, victim.mac_address)
    finally:
        admin[CENTRAL].network.delete_port(victim, ignore_missing=True)
        for policy in admin[CENTRAL].network.rbac_policies(object_id=net.id):
            admin[CENTRAL].network.delete_rbac_policy(policy, ignore_missing=True)


def test_network_hinted_to_one_region_stays_there(sandbox, central, admin):
    net = central.network.create_network(name=f"one-{uuid.uuid4().hex[:6]}", availability_zone_hints=["RegionOne"])
    central.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.79.0.0/24")
    try:
        assert list(sandbox.connect("RegionTwo").network.networks(id=net.id)) == []
        with pytest.raises(os_exc.NotFoundException):
            sandbox.connect("RegionTwo").network.get_network(net.id)
        assert sandbox.connect("RegionOne").network.get_network(net.id).id == net.id
    finally:
        eventually(lambda: delete_network(central, net.id), timeout=60)
        eventually(lambda: network_or_none(admin["RegionOne"], net.id) is None, what="copy removed")


def test_twenty_concurrent_boots_across_regions_get_distinct_central_ips(sandbox, admin, stretched):
    net, _ = stretched
    regions = [sandbox.regions[i % 2] for i in range(20)]
    with ThreadPoolExecutor(max_workers=10) as pool:
        made = list(pool.map(lambda r: (r, boot(sandbox.connect(r), net.name, net.id)), regions))
    ips = []
    for region, server in made:
        server = sandbox.connect(region).compute.wait_for_server(server, wait=600)
        assert server.status == "ACTIVE", server.fault
        ips += [a["addr"] for addrs in server.addresses.values() for a in addrs]
    assert len(ips) == 20 and len(set(ips)) == 20
    central_ips = {ip["ip_address"] for p in admin[CENTRAL].network.ports(network_id=net.id) for ip in p.fixed_ips}
    assert set(ips) <= central_ips


def test_ipv6_subnet_is_copied_with_a_regional_gateway(sandbox, central, admin, stretched):
    net, subnet = stretched
    v6 = central.network.create_subnet(network_id=net.id, ip_version=6, cidr="fd00:77::/64",
                                       ipv6_address_mode="dhcpv6-stateful", ipv6_ra_mode="dhcpv6-stateful")
    conn = sandbox.connect("RegionOne")
    server = conn.compute.wait_for_server(boot(conn, net.name, net.id), wait=240)
    copy = admin["RegionOne"].network.get_subnet(v6.id)
    reservation = next(admin[CENTRAL].network.ports(network_id=net.id, name=f"interface_RegionOne_{v6.id}"))
    assert copy.cidr == "fd00:77::/64"
    assert copy.gateway_ip == reservation.fixed_ips[0]["ip_address"] != v6.gateway_ip
    (port,) = list(admin["RegionOne"].network.ports(device_id=server.id))
    assert {ip["subnet_id"] for ip in port.fixed_ips} == {subnet.id, v6.id}
    assert sorted(map(str, central_port(admin, port.id).fixed_ips)) == sorted(map(str, port.fixed_ips))


# ------------------------------------------------ outages, drift, worker crashes

@pytest.mark.exclusive
def test_a_region_down_blocks_nothing_else_and_loses_nothing(sandbox, central, admin, stretched):
    net, subnet = stretched
    one, two = sandbox.regions
    conn_two = sandbox.connect(two)
    server_two = conn_two.compute.wait_for_server(boot(conn_two, net.name, net.id), wait=240)
    (port_two,) = list(admin[two].network.ports(device_id=server_two.id))
    sandbox_cli(sandbox, "sandbox", "stop", f"neutron-{two}")
    try:
        # Central answers, and the other region boots on the same network.
        central.network.update_network(net, description="while RegionTwo is down")
        conn_one = sandbox.connect(one)
        server_one = conn_one.compute.wait_for_server(boot(conn_one, net.name, net.id), wait=240)
        assert server_one.status == "ACTIVE"
        (port_one,) = list(admin[one].network.ports(device_id=server_one.id))
        eventually(lambda: port_or_none(admin[one], port_two.id), what=f"shadow of the {two} port in {one}")
        eventually(lambda: admin[one].network.get_network(net.id).description == "while RegionTwo is down",
                   what=f"update in {one}")
    finally:
        sandbox_cli(sandbox, "sandbox", "restart", f"neutron-{two}")
    # The waiting jobs complete once the region is back; nothing was deleted there.
    admin[two] = sandbox.connect(two, cloud="isthmus-admin")
    eventually(lambda: (network_or_none(admin[two], net.id) or net).description == "while RegionTwo is down",
               timeout=180, what=f"update in {two} after it returned")
    eventually(lambda: port_or_none(admin[two], port_one.id), timeout=180, what=f"shadow in {two}")
    assert admin[two].network.get_port(port_two.id).binding_host_id == f"{two.lower()}-compute"


def test_drift_in_a_region_is_repaired_by_a_reconcile_job(sandbox, central, admin, stretched):
    net, subnet = stretched
    one = sandbox.regions[0]
    conn = sandbox.connect(one)
    conn.compute.wait_for_server(boot(conn, net.name, net.id), wait=240)
    admin[one].network.update_network(net.id, description="changed out of band")
    admin[one].network.update_subnet(subnet.id, dns_nameservers=["198.51.100.1"])
    sandbox_cli(sandbox, "sandbox", "logs", "isthmus-xjob", "-n", "1")  # the worker is there
    enqueue_job(sandbox, "network_sync", net.id)
    eventually(lambda: admin[one].network.get_network(net.id).description == (net.description or ""),
               what="description restored")
    eventually(lambda: admin[one].network.get_subnet(subnet.id).dns_nameservers == [], what="dns restored")


@pytest.mark.exclusive
def test_killed_worker_resumes_its_jobs(sandbox, central, admin, stretched):
    net, _ = stretched
    one, two = sandbox.regions
    sandbox_cli(sandbox, "sandbox", "stop", "isthmus-xjob")
    try:
        servers = {}
        for region in (one, two):
            conn = sandbox.connect(region)
            servers[region] = conn.compute.wait_for_server(boot(conn, net.name, net.id), wait=240)
        (port_two,) = list(admin[two].network.ports(device_id=servers[two].id))
        time.sleep(3)
        assert port_or_none(admin[one], port_two.id) is None  # no worker, no shadow yet
        from isthmus.db import make_engine
        from isthmus.jobs import JobStatus, JobStore

        job = JobStore(make_engine(sandbox_layout(sandbox.state_dir).isthmus_db_url)).find("network_sync", net.id)
        assert job is not None and job.status == JobStatus.NEW  # queued durably, waiting for a worker
    finally:
        sandbox_cli(sandbox, "sandbox", "restart", "isthmus-xjob")
    shadow = eventually(lambda: port_or_none(admin[one], port_two.id), what="shadow after restart")
    assert shadow.device_owner == SHADOW_OWNER
    assert len([p for p in admin[one].network.ports(network_id=net.id) if p.id == port_two.id]) == 1


@pytest.mark.exclusive
def test_a_port_freed_in_one_region_boots_in_another_before_the_worker_removes_its_shadow(
        sandbox, central, admin, stretched):
    """Nova refused the boot ("port still in use") while the other region still held
    the port's shadow, until port_sync removed it (a full run caught it). The region
    replaces a shadow that central says is stale when Nova asks for the port."""
    net, _ = stretched
    one, two = sandbox.regions
    port = central.network.create_port(network_id=net.id, name=f"{net.name}-freed")
    second = sandbox.connect(two)
    # A server of its own there: a region shadows only networks it has ports on.
    second.compute.wait_for_server(boot(second, net.name, net.id), wait=240)
    first = sandbox.connect(one)
    server = first.compute.wait_for_server(boot(first, net.name, port_id=port.id), wait=240)
    eventually(lambda: getattr(port_or_none(admin[two], port.id), "device_owner", None) == SHADOW_OWNER,
               what=f"the shadow in {two}")
    sandbox_cli(sandbox, "sandbox", "stop", "isthmus-xjob")
    try:
        first.compute.delete_server(server)
        first.compute.wait_for_delete(server, wait=120)
        eventually(lambda: not central_port(admin, port.id).binding_host_id, what=f"unbound after {one}")
        # Listed, not read by id (a read by id is what replaces it): no worker, still there.
        assert [p.device_owner for p in admin[two].network.ports(id=port.id)] == [SHADOW_OWNER]
        moved = second.compute.wait_for_server(boot(second, net.name, port_id=port.id), wait=240)
        assert moved.status == "ACTIVE", moved.fault
        regional = admin[two].network.get_port(port.id)
        assert (regional.mac_address, regional.fixed_ips) == (port.mac_address, port.fixed_ips)
        second.compute.delete_server(moved)
    finally:
        sandbox_cli(sandbox, "sandbox", "restart", "isthmus-xjob")


@pytest.mark.exclusive
def test_noop_mode_makes_no_shadows_and_removes_existing_ones(sandbox, central, admin, stretched):
    """With ``[isthmus] cross_region_l2 = noop`` no region holds shadow ports."""
    from isthmus.sandbox import xjob

    net, _ = stretched
    one, two = sandbox.regions
    ports = {}
    for region in (one, two):
        conn = sandbox.connect(region)
        server = conn.compute.wait_for_server(boot(conn, net.name, net.id), wait=240)
        (ports[region],) = list(admin[region].network.ports(device_id=server.id))
    eventually(lambda: port_or_none(admin[one], ports[two].id), what="shadow before noop")
    override = xjob.config_dir(sandbox_layout(sandbox.state_dir)) / "l2.conf"
    override.write_text("[isthmus]\ncross_region_l2 = noop\n")
    try:
        sandbox_cli(sandbox, "sandbox", "restart", "isthmus-xjob")
        enqueue_job(sandbox, "network_sync", net.id)
        for region in (one, two):
            eventually(lambda: not list(admin[region].network.ports(network_id=net.id, device_owner=SHADOW_OWNER)),  # noqa: B023 - polled within this iteration
                       what=f"no shadows in {region}")
    finally:
        override.unlink()
        sandbox_cli(sandbox, "sandbox", "restart", "isthmus-xjob")
    enqueue_job(sandbox, "network_sync", net.id)
    eventually(lambda: port_or_none(admin[one], ports[two].id), what="shadow back in shadow mode")
