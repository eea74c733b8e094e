"""Cross-region networking on the real sandbox, part two: changes made at central
(updates, security-group rules and members, deletes, provider networks, a port
moving between regions) reach every copy. Part one, test_networking.py, holds
placement, boots and L2, and outages; the two halves balance the test workers.
"""

from __future__ import annotations

import uuid

import openstack.exceptions as os_exc
import pytest

from tests.integration.helpers import (
    CENTRAL,
    boot,
    boot_in_every_region_on_group_ports,
    central_port,
    delete_network,
    delete_security_group,
    delete_user_ports,
    eventually,
    network_or_none,
    port_or_none,
    sandbox_layout,
    security_group_or_none,
)

pytestmark = pytest.mark.integration


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
        servers = boot_in_every_region_on_group_ports(sandbox, central, net, group)
        for region in sandbox.regions:
            other = next(r for r in sandbox.regions if r != region)
            remote = servers[other][1]

            def rules(region=region):
                copy = admin[region].network.get_security_group(group.id)
                return {(r["protocol"], r["port_range_min"], r["remote_ip_prefix"]) for r in copy.security_group_rules
                        if r["direction"] == "ingress"}
            # The remote member shares the network: its shadow here holds the group, so
            # the region counts it a member itself (its remote-group rule admits it).
            # The address group and its companion rule are there for members the
            # region does not shadow; this one is not in it. No /32 rule per member.
            eventually(lambda: getattr(port_or_none(admin[region], remote.id),  # noqa: B023 - polled within this iteration
                                       "security_group_ids", None) == [group.id],
                       what=f"{other}'s member shadowed in {region} in the group")
            members = eventually(lambda: _members_here(admin[region], group), what=f"address group in {region}")  # noqa: B023 - polled within this iteration
            eventually(lambda: _companions(admin[region], group.id) == {("tcp", 80, members["id"])},  # noqa: B023 - polled within this iteration
                       what=f"companion rule in {region}")
            assert f"{remote.fixed_ips[0]['ip_address']}/32" not in _addresses_here(admin[region], group)
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
        eventually(lambda: delete_security_group(central, group.id), timeout=60)


def _members_here(conn, group):
    """The Isthmus address group of ``group``'s members bound in other regions (None: none yet)."""
    found = list(conn.network.address_groups(name=f"isthmus-members-{group.id}", project_id=group.project_id))
    assert len(found) <= 1, found
    return {"id": found[0].id, "addresses": sorted(found[0].addresses)} if found else None


def _addresses_here(conn, group) -> list[str]:
    return (_members_here(conn, group) or {}).get("addresses", [])


def _companions(conn, group_id):
    return {(r["protocol"], r["port_range_min"], r["remote_address_group_id"])
            for r in conn.network.get_security_group(group_id).security_group_rules
            if r.get("remote_address_group_id")}


def test_default_group_members_in_other_regions_are_one_address_group(sandbox, central, admin, stretched):
    """Two VMs in the project's default group, one per region, on networks that
    stay in their own region (no shadow of either crosses): each region admits
    the other's address through one address group and one companion per
    remote-group rule (no /32 member rules); deleting a VM takes its address out.
    Other tests boot into the same default group at the same time: membership is
    checked for this test's addresses, not for the whole list."""
    net, _ = stretched
    (default,) = list(central.network.security_groups(name="default", project_id=central.current_project_id))
    remote_rules = [r for r in default.security_group_rules if r["remote_group_id"]]
    assert remote_rules  # Neutron's default group admits its own members (IPv4 and IPv6)
    other_net = central.network.create_network(name=f"{net.name}-2")
    central.network.create_subnet(network_id=other_net.id, ip_version=4, cidr="10.78.0.0/24", name=other_net.name)
    try:
        _members_across_networks(sandbox, admin, default, remote_rules, {sandbox.regions[0]: net,
                                                                         sandbox.regions[1]: other_net})
    finally:
        conn = sandbox.connect(sandbox.regions[1])
        for server in conn.compute.servers(name=other_net.name):
            conn.compute.delete_server(server)
            conn.compute.wait_for_delete(server, wait=120)
        delete_user_ports(central, other_net.id)
        eventually(lambda: delete_network(central, other_net.id), timeout=60, what=f"delete of {other_net.id}")


def _members_across_networks(sandbox, admin, default, remote_rules, networks) -> None:
    servers, addresses = {}, {}
    for region in sandbox.regions:
        conn = sandbox.connect(region)
        net = networks[region]
        servers[region] = conn.compute.wait_for_server(boot(conn, net.name, net.id), wait=240)
        (port,) = list(conn.network.ports(device_id=servers[region].id))
        addresses[region] = f"{port.fixed_ips[0]['ip_address']}/32"
    for region in sandbox.regions:
        (other,) = [r for r in sandbox.regions if r != region]
        eventually(lambda: addresses[other] in _addresses_here(admin[region], default),  # noqa: B023 - polled within this iteration
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
    eventually(lambda: addresses[two] not in _addresses_here(admin[one], default),
               what=f"{two}'s deleted VM out of {one}'s address group")
    assert addresses[one] in _addresses_here(admin[two], default)


def test_a_plain_port_deleted_in_a_region_is_deleted_at_central_and_everywhere(sandbox, central, admin, stretched):
    net, _ = stretched
    one, two = sandbox.regions
    port = sandbox.connect(one).network.create_port(network_id=net.id, name=net.name)  # no device_owner
    assert port_or_none(admin[CENTRAL], port.id) is not None  # allocated at central
    assert admin[two].network.get_port(port.id).mac_address == port.mac_address  # copied on lookup
    sandbox.connect(one).network.delete_port(port.id)
    assert port_or_none(admin[CENTRAL], port.id) is None
    eventually(lambda: port_or_none(admin[two], port.id) is None, what=f"copy of {port.id} gone in {two}")


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
    eventually(lambda: port_or_none(admin[sandbox.regions[1]], one_port.id), what="shadow before delete")
    sandbox.connect(sandbox.regions[0]).compute.delete_server(one)
    sandbox.connect(sandbox.regions[0]).compute.wait_for_delete(one, wait=120)
    eventually(lambda: port_or_none(admin[CENTRAL], one_port.id) is None, what="central port deleted")
    eventually(lambda: port_or_none(admin[sandbox.regions[1]], one_port.id) is None, what="shadow deleted")
    two = servers[sandbox.regions[1]]
    sandbox.connect(sandbox.regions[1]).compute.delete_server(two)
    sandbox.connect(sandbox.regions[1]).compute.wait_for_delete(two, wait=120)
    eventually(lambda: delete_network(central, net.id), timeout=60, what="network delete")
    for region in sandbox.regions:
        eventually(lambda: network_or_none(admin[region], net.id) is None, what=f"copy gone in {region}")  # noqa: B023 - polled within this iteration


# ------------------------------------------- provider networks, SG deletes, port reuse

def test_vlan_network_copies_keep_physnet_and_segmentation_id(sandbox, admin):
    """A VLAN network made by admin at central keeps its segment in every region."""
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
        delete_user_ports(admin[CENTRAL], top.id)
        eventually(lambda: delete_network(admin[CENTRAL], top.id), timeout=60)
        for region in sandbox.regions:
            eventually(lambda: network_or_none(admin[region], top.id) is None, what=f"copy gone in {region}")  # noqa: B023 - polled within this iteration


def test_deleting_a_security_group_at_central_deletes_every_copy(sandbox, central, admin, stretched):
    """One VM per region on a port in the group, then the VMs, ports and group go."""
    net, _ = stretched
    group = central.network.create_security_group(name=f"sgdel-{uuid.uuid4().hex[:6]}")
    servers = boot_in_every_region_on_group_ports(sandbox, central, net, group)
    for region in sandbox.regions:
        assert admin[region].network.get_security_group(group.id).id == group.id
    for region, (server, _port) in servers.items():
        sandbox.connect(region).compute.delete_server(server)
    for region, (server, port) in servers.items():
        sandbox.connect(region).compute.wait_for_delete(server, wait=120)
        central.network.delete_port(port.id, ignore_missing=True)
    eventually(lambda: delete_security_group(central, group.id), timeout=60, what="central delete of the group")
    for region in sandbox.regions:
        # Ask the regional Neutron without the local plugin's copy-on-GET: list by id
        # as admin is not a GET by id of the group (which would re-copy it if central
        # still had it).
        eventually(lambda: not [g for g in admin[region].network.security_groups(project_id=group.project_id)  # noqa: B023 - polled within this iteration
                                if g.id == group.id], what=f"group copy gone in {region}")
        assert security_group_or_none(admin[region], group.id) is None


def test_a_port_moves_between_regions_with_its_server(sandbox, central, admin, stretched):
    """Boot on P in RegionOne, delete; boot on P in RegionTwo; delete; RegionOne again."""
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
