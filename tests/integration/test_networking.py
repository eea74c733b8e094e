"""Cross-region networking on the real sandbox (issue 3; reference §7 B5–B16, B27–B33).

Networks live in CentralRegion's Neutron; regional Neutrons copy them on demand
with the same UUID, and the job worker wires shadow ports and security groups.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import openstack.exceptions as os_exc
import pytest

from tests.integration.helpers import CENTRAL, delete_network, eventually, sandbox_layout

pytestmark = pytest.mark.integration


def boot(conn, name: str, network_id: str | None = None, port_id: str | None = None):
    image = conn.image.find_image("tiny", ignore_missing=False)
    flavor = conn.compute.find_flavor("m1.tiny", ignore_missing=False)
    nic = {"port": port_id} if port_id else {"uuid": network_id}
    return conn.compute.create_server(name=name, image_id=image.id, flavor_id=flavor.id, networks=[nic])


def central_port(admin, port_id):
    return admin[CENTRAL].network.get_port(port_id)


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
            shadow = eventually(lambda: _port_or_none(admin[region], remote.id), what=f"shadow in {region}")  # noqa: B023 - polled within this iteration
            assert shadow.device_owner == "compute:shadow"
            assert (shadow.mac_address, shadow.fixed_ips) == (remote.mac_address, remote.fixed_ips)
            assert shadow.binding_host_id == f"{other.lower()}-compute"
            # B16: the remote host has a (shadow) OVS agent here with its real tunnel IP.
            remote_agent = next(a for a in admin[other].network.agents(host=f"{other.lower()}-compute")
                                if a.agent_type == "Open vSwitch agent")
            (shadow_agent,) = [a for a in admin[region].network.agents(host=f"{other.lower()}-compute")
                               if a.agent_type == "Open vSwitch agent"]
            assert shadow_agent.configuration["tunneling_ip"] == remote_agent.configuration["tunneling_ip"]
            assert shadow_agent.configuration["isthmus_shadow_of"] == other


def _port_or_none(conn, port_id):
    try:
        return conn.network.get_port(port_id)
    except os_exc.NotFoundException:
        return None


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


def test_regional_fixed_ip_must_be_allocated_at_central(sandbox, central, admin, stretched):
    net, subnet = stretched
    conn = sandbox.connect("RegionOne")
    with pytest.raises(os_exc.BadRequestException, match="10.77.0.250"):
        conn.network.create_port(network_id=net.id, fixed_ips=[{"subnet_id": subnet.id, "ip_address": "10.77.0.250"}])
    held = central.network.create_port(network_id=net.id)
    address = held.fixed_ips[0]["ip_address"]
    copy = conn.network.create_port(network_id=net.id, fixed_ips=[{"subnet_id": subnet.id, "ip_address": address}])
    try:
        assert (copy.id, copy.mac_address) == (held.id, held.mac_address)
    finally:
        admin["RegionOne"].network.delete_port(copy.id)
        central.network.delete_port(held, ignore_missing=True)


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
        eventually(lambda: _network_or_none(admin["RegionOne"], net.id) is None, what="copy removed")


def _network_or_none(conn, network_id):
    try:
        return conn.network.get_network(network_id)
    except os_exc.NotFoundException:
        return None


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


# ------------------------------------------------------- updates, rules, deletes

def test_network_and_subnet_updates_reach_every_region(sandbox, central, admin, stretched):
    net, subnet = stretched
    for region in sandbox.regions:
        conn = sandbox.connect(region)
        conn.compute.wait_for_server(boot(conn, net.name, net.id), wait=240)
    gateways = {r: admin[r].network.get_subnet(subnet.id).gateway_ip for r in sandbox.regions}
    central.network.update_network(net, description="stretched across regions")
    central.network.update_subnet(subnet, dns_nameservers=["192.0.2.53"])
    for region in sandbox.regions:
        eventually(lambda: admin[region].network.get_network(net.id).description == "stretched across regions",  # noqa: B023 - polled within this iteration
                   what=f"description in {region}")
        eventually(lambda: admin[region].network.get_subnet(subnet.id).dns_nameservers == ["192.0.2.53"],  # noqa: B023 - polled within this iteration
                   what=f"dns in {region}")
        assert admin[region].network.get_subnet(subnet.id).gateway_ip == gateways[region]


def test_security_group_rules_follow_central_with_remote_group_members(sandbox, central, admin, stretched):
    net, _ = stretched
    group = central.network.create_security_group(name=f"sg-{uuid.uuid4().hex[:6]}")
    try:
        ssh = central.network.create_security_group_rule(
            security_group_id=group.id, direction="ingress", protocol="tcp", port_range_min=22, port_range_max=22,
            ethertype="IPv4")
        central.network.create_security_group_rule(
            security_group_id=group.id, direction="ingress", protocol="tcp", port_range_min=80, port_range_max=80,
            ethertype="IPv4", remote_group_id=group.id)
        servers = {}
        for region in sandbox.regions:
            port = central.network.create_port(network_id=net.id, security_group_ids=[group.id], name=net.name)
            conn = sandbox.connect(region)
            servers[region] = (conn.compute.wait_for_server(boot(conn, net.name, port_id=port.id), wait=240), port)
        for region in sandbox.regions:
            other = next(r for r in sandbox.regions if r != region)
            remote_ip = servers[other][1].fixed_ips[0]["ip_address"]

            def rules(region=region):
                copy = admin[region].network.get_security_group(group.id)
                return {(r["protocol"], r["port_range_min"], r["remote_ip_prefix"]) for r in copy.security_group_rules
                        if r["direction"] == "ingress"}
            # The remote member is in the group's address group here, named by one
            # companion of the remote-group rule; no /32 rule per member.
            members = eventually(lambda: (m := _members_here(admin[region], group)) and  # noqa: B023 - polled within this iteration
                                 m["addresses"] == [f"{remote_ip}/32"] and m, what=f"members in {region}")  # noqa: B023 - polled within this iteration
            eventually(lambda: _companions(admin[region], group.id) == {("tcp", 80, members["id"])},  # noqa: B023 - polled within this iteration
                       what=f"companion rule in {region}")
            assert {("tcp", 22, None), ("tcp", 80, None)} <= rules()
            assert not any(prefix and prefix.endswith("/32") for (_, _, prefix) in rules())
        central.network.delete_security_group_rule(ssh)
        for region in sandbox.regions:
            eventually(lambda: not any(r["port_range_min"] == 22 for r in
                                       admin[region].network.get_security_group(group.id).security_group_rules),  # noqa: B023 - polled within this iteration
                       what=f"rule removed in {region}")
        # An admin (another project) editing the group syncs the group owner's copies.
        https = admin[CENTRAL].network.create_security_group_rule(
            security_group_id=group.id, direction="ingress", protocol="tcp", port_range_min=443, port_range_max=443,
            ethertype="IPv4")
        for region in sandbox.regions:
            eventually(lambda: ("tcp", 443, None) in rules(region), what=f"admin's rule in {region}")  # noqa: B023 - polled within this iteration
        admin[CENTRAL].network.delete_security_group_rule(https)
        for region in sandbox.regions:
            eventually(lambda: ("tcp", 443, None) not in rules(region), what=f"admin's rule gone in {region}")  # noqa: B023 - polled within this iteration
    finally:
        for region, (server, port) in locals().get("servers", {}).items():
            sandbox.connect(region).compute.delete_server(server)
            sandbox.connect(region).compute.wait_for_delete(server, wait=120)
            central.network.delete_port(port.id, ignore_missing=True)
        eventually(lambda: _delete_sg(central, group.id), timeout=60)


def _members_here(conn, group):
    """The Isthmus address group of ``group``'s members bound in other regions (None: none yet)."""
    found = list(conn.network.address_groups(name=f"isthmus-members-{group.id}", project_id=group.project_id))
    assert len(found) <= 1, found
    return {"id": found[0].id, "addresses": sorted(found[0].addresses)} if found else None


def _companions(conn, group_id):
    return {(r["protocol"], r["port_range_min"], r["remote_address_group_id"])
            for r in conn.network.get_security_group(group_id).security_group_rules
            if r.get("remote_address_group_id")}


def test_default_group_members_in_other_regions_are_one_address_group(sandbox, central, admin, stretched):
    """Two VMs in the project's default group, one per region: each region admits
    the other's address through one address group and one companion per
    remote-group rule (no /32 member rules); deleting a VM takes its address out."""
    net, _ = stretched
    (default,) = list(central.network.security_groups(name="default", project_id=central.current_project_id))
    remote_rules = [r for r in default.security_group_rules if r["remote_group_id"]]
    assert remote_rules  # Neutron's default group admits its own members (IPv4 and IPv6)
    servers, addresses = {}, {}
    for region in sandbox.regions:
        conn = sandbox.connect(region)
        servers[region] = conn.compute.wait_for_server(boot(conn, net.name, net.id), wait=240)
        (port,) = list(conn.network.ports(device_id=servers[region].id))
        addresses[region] = f"{port.fixed_ips[0]['ip_address']}/32"
    for region in sandbox.regions:
        (other,) = [r for r in sandbox.regions if r != region]
        eventually(lambda: (_members_here(admin[region], default) or {}).get("addresses") == [addresses[other]],  # noqa: B023 - polled within this iteration
                   what=f"{other}'s VM in {region}'s address group")
        members = _members_here(admin[region], default)
        copy = admin[region].network.get_security_group(default.id)
        companions = [r for r in copy.security_group_rules if r.get("remote_address_group_id")]
        assert sorted((r["direction"], r["ethertype"]) for r in companions) == \
            sorted((r["direction"], r["ethertype"]) for r in remote_rules)
        assert {r["remote_address_group_id"] for r in companions} == {members["id"]}
        assert all(r["remote_group_id"] is None for r in companions)
        # The remote-group rules themselves stay (members bound here), and no member rules.
        assert len([r for r in copy.security_group_rules if r["remote_group_id"] == default.id]) == len(remote_rules)
        assert not [r for r in copy.security_group_rules
                    if (r.get("description") or "").startswith("isthmus:member-of:")]
    one, two = sandbox.regions
    conn = sandbox.connect(two)
    conn.compute.delete_server(servers[two])
    conn.compute.wait_for_delete(servers[two], wait=120)
    eventually(lambda: _members_here(admin[one], default)["addresses"] == [],
               what=f"{two}'s deleted VM out of {one}'s address group")
    assert _members_here(admin[two], default)["addresses"] == [addresses[one]]


def _delete_sg(conn, sg_id):
    try:
        conn.network.delete_security_group(sg_id, ignore_missing=True)
        return True
    except os_exc.ConflictException:
        return False


def test_a_plain_port_deleted_in_a_region_is_deleted_at_central_and_everywhere(sandbox, central, admin, stretched):
    net, _ = stretched
    one, two = sandbox.regions
    port = sandbox.connect(one).network.create_port(network_id=net.id, name=net.name)  # no device_owner
    assert _port_or_none(admin[CENTRAL], port.id) is not None  # allocated at central
    assert admin[two].network.get_port(port.id).mac_address == port.mac_address  # copied on lookup
    sandbox.connect(one).network.delete_port(port.id)
    assert _port_or_none(admin[CENTRAL], port.id) is None
    eventually(lambda: _port_or_none(admin[two], port.id) is None, what=f"copy of {port.id} gone in {two}")


def test_a_bulk_port_create_in_a_region_allocates_each_port_at_central(sandbox, central, admin, stretched):
    net, _ = stretched
    one = sandbox.regions[0]
    conn = sandbox.connect(one)
    reply = conn.network.post("/ports", json={"ports": [{"network_id": net.id, "name": net.name}] * 3},
                              raise_exc=True)
    made = reply.json()["ports"]
    assert len({p["id"] for p in made}) == 3
    for port in made:
        top = central_port(admin, port["id"])
        assert (top.mac_address, top.fixed_ips) == (port["mac_address"], port["fixed_ips"])
    for port in made:
        conn.network.delete_port(port["id"])


def test_a_port_created_bound_is_reported_to_central(sandbox, central, admin, stretched):
    net, _ = stretched
    one = sandbox.regions[0]
    port = admin[one].network.create_port(network_id=net.id, binding_host_id=f"{one.lower()}-compute",
                                          device_owner="compute:az1", device_id=str(uuid.uuid4()), name=net.name)
    try:
        top = central_port(admin, port.id)
        assert top.binding_host_id == f"{one.lower()}-compute" and top.binding_profile["isthmus"]["region"] == one
    finally:
        admin[one].network.delete_port(port.id)


def test_deleting_ports_and_networks_reaches_every_copy(sandbox, central, admin):
    net = central.network.create_network(name=f"d-{uuid.uuid4().hex[:6]}")
    central.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.80.0.0/24")
    servers = {}
    for region in sandbox.regions:
        conn = sandbox.connect(region)
        servers[region] = conn.compute.wait_for_server(boot(conn, net.name, net.id), wait=240)
    with pytest.raises(os_exc.ConflictException):
        central.network.delete_network(net)  # user ports remain
    one = servers[sandbox.regions[0]]
    (one_port,) = list(admin[sandbox.regions[0]].network.ports(device_id=one.id))
    eventually(lambda: _port_or_none(admin[sandbox.regions[1]], one_port.id), what="shadow before delete")
    sandbox.connect(sandbox.regions[0]).compute.delete_server(one)
    sandbox.connect(sandbox.regions[0]).compute.wait_for_delete(one, wait=120)
    eventually(lambda: _port_or_none(admin[CENTRAL], one_port.id) is None, what="central port deleted")
    eventually(lambda: _port_or_none(admin[sandbox.regions[1]], one_port.id) is None, what="shadow deleted")
    two = servers[sandbox.regions[1]]
    sandbox.connect(sandbox.regions[1]).compute.delete_server(two)
    sandbox.connect(sandbox.regions[1]).compute.wait_for_delete(two, wait=120)
    eventually(lambda: delete_network(central, net.id), timeout=60, what="network delete")
    for region in sandbox.regions:
        eventually(lambda: _network_or_none(admin[region], net.id) is None, what=f"copy gone in {region}")  # noqa: B023 - polled within this iteration


# ------------------------------------------------ outages, drift, worker crashes

def _isthmus(sandbox, *args):
    from tests.sandboxes import isthmus

    return isthmus(*args[:2], "--state-dir", str(sandbox.state_dir), *args[2:])


@pytest.mark.exclusive
def test_a_region_down_blocks_nothing_else_and_loses_nothing(sandbox, central, admin, stretched):
    net, subnet = stretched
    one, two = sandbox.regions
    conn_two = sandbox.connect(two)
    server_two = conn_two.compute.wait_for_server(boot(conn_two, net.name, net.id), wait=240)
    (port_two,) = list(admin[two].network.ports(device_id=server_two.id))
    _isthmus(sandbox, "sandbox", "stop", f"neutron-{two}")
    try:
        # Central answers, and the other region boots on the same network.
        central.network.update_network(net, description="while RegionTwo is down")
        conn_one = sandbox.connect(one)
        server_one = conn_one.compute.wait_for_server(boot(conn_one, net.name, net.id), wait=240)
        assert server_one.status == "ACTIVE"
        (port_one,) = list(admin[one].network.ports(device_id=server_one.id))
        eventually(lambda: _port_or_none(admin[one], port_two.id), what=f"shadow of the {two} port in {one}")
        eventually(lambda: admin[one].network.get_network(net.id).description == "while RegionTwo is down",
                   what=f"update in {one}")
    finally:
        _isthmus(sandbox, "sandbox", "restart", f"neutron-{two}")
    # The waiting jobs complete once the region is back; nothing was deleted there.
    admin[two] = sandbox.connect(two, cloud="isthmus-admin")
    eventually(lambda: (_network_or_none(admin[two], net.id) or net).description == "while RegionTwo is down",
               timeout=180, what=f"update in {two} after it returned")
    eventually(lambda: _port_or_none(admin[two], port_one.id), timeout=180, what=f"shadow in {two}")
    assert admin[two].network.get_port(port_two.id).binding_host_id == f"{two.lower()}-compute"


def test_drift_in_a_region_is_repaired_by_a_reconcile_job(sandbox, central, admin, stretched):
    net, subnet = stretched
    one = sandbox.regions[0]
    conn = sandbox.connect(one)
    conn.compute.wait_for_server(boot(conn, net.name, net.id), wait=240)
    admin[one].network.update_network(net.id, description="changed out of band")
    admin[one].network.update_subnet(subnet.id, dns_nameservers=["198.51.100.1"])
    _isthmus(sandbox, "sandbox", "logs", "isthmus-xjob", "-n", "1")  # the worker is there
    _enqueue(sandbox, "network_sync", net.id)
    eventually(lambda: admin[one].network.get_network(net.id).description == (net.description or ""),
               what="description restored")
    eventually(lambda: admin[one].network.get_subnet(subnet.id).dns_nameservers == [], what="dns restored")


@pytest.mark.exclusive
def test_killed_worker_resumes_its_jobs(sandbox, central, admin, stretched):
    net, _ = stretched
    one, two = sandbox.regions
    _isthmus(sandbox, "sandbox", "stop", "isthmus-xjob")
    try:
        servers = {}
        for region in (one, two):
            conn = sandbox.connect(region)
            servers[region] = conn.compute.wait_for_server(boot(conn, net.name, net.id), wait=240)
        (port_two,) = list(admin[two].network.ports(device_id=servers[two].id))
        time.sleep(3)
        assert _port_or_none(admin[one], port_two.id) is None  # no worker, no shadow yet
        from isthmus.db import make_engine
        from isthmus.jobs import JobStatus, JobStore

        job = JobStore(make_engine(sandbox_layout(sandbox.state_dir).isthmus_db_url)).find("network_sync", net.id)
        assert job is not None and job.status == JobStatus.NEW  # queued durably, waiting for a worker
    finally:
        _isthmus(sandbox, "sandbox", "restart", "isthmus-xjob")
    shadow = eventually(lambda: _port_or_none(admin[one], port_two.id), what="shadow after restart")
    assert shadow.device_owner == "compute:shadow"
    assert len([p for p in admin[one].network.ports(network_id=net.id) if p.id == port_two.id]) == 1


@pytest.mark.exclusive
def test_noop_mode_makes_no_shadows_and_removes_existing_ones(sandbox, central, admin, stretched):
    """B17: with ``[isthmus] cross_region_l2 = noop`` no region holds shadow ports."""
    from isthmus.sandbox import xjob

    net, _ = stretched
    one, two = sandbox.regions
    ports = {}
    for region in (one, two):
        conn = sandbox.connect(region)
        server = conn.compute.wait_for_server(boot(conn, net.name, net.id), wait=240)
        (ports[region],) = list(admin[region].network.ports(device_id=server.id))
    eventually(lambda: _port_or_none(admin[one], ports[two].id), what="shadow before noop")
    override = xjob.config_dir(sandbox_layout(sandbox.state_dir)) / "l2.conf"
    override.write_text("[isthmus]\ncross_region_l2 = noop\n")
    try:
        _isthmus(sandbox, "sandbox", "restart", "isthmus-xjob")
        _enqueue(sandbox, "network_sync", net.id)
        for region in (one, two):
            eventually(lambda: not list(admin[region].network.ports(network_id=net.id, device_owner="compute:shadow")),  # noqa: B023 - polled within this iteration
                       what=f"no shadows in {region}")
    finally:
        override.unlink()
        _isthmus(sandbox, "sandbox", "restart", "isthmus-xjob")
    _enqueue(sandbox, "network_sync", net.id)
    eventually(lambda: _port_or_none(admin[one], ports[two].id), what="shadow back in shadow mode")


def _enqueue(sandbox, job_type: str, resource_id: str) -> None:
    """As ``openstack multiregion job create`` does."""
    from isthmus.db import make_engine
    from isthmus.jobs import JobStore

    JobStore(make_engine(sandbox_layout(sandbox.state_dir).isthmus_db_url)).enqueue(job_type, resource_id)


# ------------------------------------------- provider networks, SG deletes, port reuse

def test_vlan_network_copies_keep_physnet_and_segmentation_id(sandbox, admin):
    """B18: a VLAN network made by admin at central keeps its segment in every region."""
    top = admin[CENTRAL].network.create_network(name=f"vlan-{uuid.uuid4().hex[:6]}", provider_network_type="vlan",
                                                provider_physical_network="physnet1")
    admin[CENTRAL].network.create_subnet(network_id=top.id, ip_version=4, cidr="10.81.0.0/24")
    try:
        top = admin[CENTRAL].network.get_network(top.id)
        assert (top.provider_network_type, top.provider_physical_network) == ("vlan", "physnet1")
        for region in sandbox.regions:
            copy = admin[region].network.get_network(top.id)  # Nova's lookup: copies it here
            assert (copy.provider_network_type, copy.provider_physical_network, copy.provider_segmentation_id) == (
                "vlan", "physnet1", top.provider_segmentation_id), region
            port = admin[region].network.create_port(network_id=top.id, name=top.name)  # used there
            assert admin[CENTRAL].network.get_port(port.id).network_id == top.id
            admin[region].network.delete_port(port)
    finally:
        for port in admin[CENTRAL].network.ports(network_id=top.id):
            if not (port.device_owner or "").startswith("network:"):
                admin[CENTRAL].network.delete_port(port, ignore_missing=True)
        eventually(lambda: delete_network(admin[CENTRAL], top.id), timeout=60)
        for region in sandbox.regions:
            eventually(lambda: _network_or_none(admin[region], top.id) is None, what=f"copy gone in {region}")  # noqa: B023 - polled within this iteration


def _sg_or_none(conn, sg_id):
    try:
        return conn.network.get_security_group(sg_id)
    except os_exc.NotFoundException:
        return None


def test_deleting_a_security_group_at_central_deletes_every_copy(sandbox, central, admin, stretched):
    """B29: one VM per region on a port in the group, then the VMs, ports and group go."""
    net, _ = stretched
    group = central.network.create_security_group(name=f"sgdel-{uuid.uuid4().hex[:6]}")
    servers = {}
    for region in sandbox.regions:
        port = central.network.create_port(network_id=net.id, security_group_ids=[group.id], name=net.name)
        conn = sandbox.connect(region)
        servers[region] = (conn.compute.wait_for_server(boot(conn, net.name, port_id=port.id), wait=240), port)
    for region in sandbox.regions:
        assert admin[region].network.get_security_group(group.id).id == group.id
    for region, (server, _port) in servers.items():
        sandbox.connect(region).compute.delete_server(server)
    for region, (server, port) in servers.items():
        sandbox.connect(region).compute.wait_for_delete(server, wait=120)
        central.network.delete_port(port.id, ignore_missing=True)
    eventually(lambda: _delete_sg(central, group.id), timeout=60, what="central delete of the group")
    for region in sandbox.regions:
        # Ask the regional Neutron without the local plugin's copy-on-GET: list by id
        # as admin is not a GET by id of the group (which would re-copy it if central
        # still had it).
        eventually(lambda: not [g for g in admin[region].network.security_groups(project_id=group.project_id)  # noqa: B023 - polled within this iteration
                                if g.id == group.id], what=f"group copy gone in {region}")
        assert _sg_or_none(admin[region], group.id) is None


def test_a_port_moves_between_regions_with_its_server(sandbox, central, admin, stretched):
    """B32: boot on P in RegionOne, delete; boot on P in RegionTwo; delete; RegionOne again."""
    net, _ = stretched
    one, two = sandbox.regions
    port = central.network.create_port(network_id=net.id, name=f"{net.name}-reuse")
    for step, region in enumerate((one, two, one)):
        conn = sandbox.connect(region)
        server = conn.compute.wait_for_server(boot(conn, net.name, port_id=port.id), wait=240)
        assert server.status == "ACTIVE", (step, region, server.fault)
        top = central_port(admin, port.id)
        assert top.binding_host_id == f"{region.lower()}-compute", (step, region)
        regional = admin[region].network.get_port(port.id)
        assert (regional.mac_address, regional.fixed_ips) == (port.mac_address, port.fixed_ips)
        conn.compute.delete_server(server)
        conn.compute.wait_for_delete(server, wait=120)
        eventually(lambda: not central_port(admin, port.id).binding_host_id, what=f"unbound after {region}")
    from isthmus.db import make_engine
    from isthmus.jobs import JobStatus, JobStore

    store = JobStore(make_engine(sandbox_layout(sandbox.state_dir).isthmus_db_url))
    eventually(lambda: getattr(store.find("network_sync", net.id), "status", None) == JobStatus.SUCCESS,
               what="network_sync SUCCESS")
