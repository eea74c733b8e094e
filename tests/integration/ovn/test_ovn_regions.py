"""Regions on ML2/OVN (docs/ovn.md): one central network stretched across regions
that each run their own OVN, packets over geneve through OVS's userspace datapath.

The OVN tier (``tools/test.sh ovn``): its own sandbox, ``isthmus sandbox up --ovn``
with three regions (or ``ISTHMUS_OVN_SANDBOX_DIR``, one already up). Needs root and
the OVN root (``tools/ovn-root.sh``); skipped with the reason otherwise.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from isthmus.clients.ovsdb import OvsdbClient, map_of, set_of, uuid_of
from isthmus.network.reconcilers.ovn.plan import TNL_KEY, remote_port_name, switch_name
from isthmus.sandbox import ovn
from isthmus.sandbox.layout import Layout
from tests.integration.helpers import CENTRAL, delete_network, eventually
from tests.integration.test_dataplane import boot_all, ip_of, pings, port_of, wait_ping
from tests.sandboxes import Sandbox, isthmus, ovn_problem, running, start_ovn_sandbox

pytestmark = [pytest.mark.integration, pytest.mark.ovn]
NB, SB = "OVN_Northbound", "OVN_Southbound"


@pytest.fixture(scope="module")
def ovn_sandbox(tmp_path_factory) -> Iterator[Sandbox]:
    existing = os.environ.get("ISTHMUS_OVN_SANDBOX_DIR")
    if existing:
        layout = Layout.load(Path(existing))
        assert layout is not None and layout.ovn_regions, f"no --ovn sandbox in {existing}"
        yield Sandbox(layout.state_dir, layout.base_port, layout.regions)
        return
    problem = ovn_problem()
    if problem:
        pytest.skip(problem)
    with running(start_ovn_sandbox, tmp_path_factory.mktemp("ovn-sandbox")) as started:
        yield started


@pytest.fixture(scope="module")
def layout(ovn_sandbox) -> Layout:
    loaded = Layout.load(ovn_sandbox.state_dir)
    assert loaded is not None
    return loaded


def nb(layout: Layout, region: str) -> OvsdbClient:
    return OvsdbClient(ovn.nb_connection(layout, region))


def sb(layout: Layout, region: str) -> OvsdbClient:
    return OvsdbClient(ovn.sb_connection(layout, region))


@pytest.fixture(scope="module")
def stretched(ovn_sandbox):
    """One central network, a server in each region (ACTIVE), their ports and IPs."""
    admin = {r: ovn_sandbox.connect(r, "isthmus-admin") for r in (CENTRAL, *ovn_sandbox.regions)}
    top = ovn_sandbox.connect(CENTRAL)
    name = f"ovn-{uuid.uuid4().hex[:6]}"
    network = top.network.create_network(name=name)
    top.network.create_subnet(network_id=network.id, ip_version=4, cidr="10.77.0.0/24", name=name)
    servers = boot_all(ovn_sandbox, name, network.id, ovn_sandbox.regions)
    ports = {r: port_of(admin, r, s) for r, s in servers.items()}
    yield {"network": network, "servers": servers, "ports": ports, "ips": {r: ip_of(p) for r, p in ports.items()},
           "admin": admin}
    for region, server in servers.items():
        ovn_sandbox.connect(region).compute.delete_server(server, ignore_missing=True)


def test_servers_in_three_ovn_regions_ping_each_other_over_geneve(ovn_sandbox, layout, stretched):
    servers, ips = stretched["servers"], stretched["ips"]
    regions = ovn_sandbox.regions
    assert len(regions) >= 3, "the third region's join is part of this test"
    for source in regions:
        for target in regions:
            if source != target:
                took = wait_ping(ovn_sandbox, servers[source], ips[target])
                print(f"{source} -> {target}: first answer {took:.1f}s after both were ACTIVE")
    network_id = stretched["network"].id
    # Every region holds the others' ports as remote ports, with the keys the
    # port's own region gave it (Southbound's binding: what geneve carries).
    for region in regions:
        (switch,) = nb(layout, region).select(NB, "Logical_Switch", [["name", "==", switch_name(network_id)]],
                                             ["other_config"])
        assert int(map_of(switch["other_config"])[TNL_KEY]) >= 16711681
    for home in regions:
        port_id = stretched["ports"][home].id
        (binding,) = sb(layout, home).select(SB, "Port_Binding", [["logical_port", "==", port_id]], ["tunnel_key"])
        for region in regions:
            if region != home:
                (row,) = nb(layout, region).select(NB, "Logical_Switch_Port",
                                                   [["name", "==", remote_port_name(port_id)]], ["type", "options"])
                assert row["type"] == "remote"
                assert map_of(row["options"])[TNL_KEY] == str(binding["tunnel_key"]), (home, region)
    # Neutron rewrites a port's options on its own updates (status, binding): the
    # key option comes back, by the port's next event or the resync.
    for home in regions:
        port_id = stretched["ports"][home].id

        def keyed(home: str = home, port_id: str = port_id) -> bool:
            rows = nb(layout, home).select(NB, "Logical_Switch_Port", [["name", "==", port_id]], ["options"])
            return TNL_KEY in map_of(rows[0]["options"])

        eventually(keyed, timeout=120, what=f"the key option on {port_id} in {home}")


def _delete_remote_port(layout: Layout, region: str, port_id: str) -> None:
    client = nb(layout, region)
    (row,) = client.select(NB, "Logical_Switch_Port", [["name", "==", remote_port_name(port_id)]], ["name"])
    switch = next(s for s in client.select(NB, "Logical_Switch", [], ["ports"])
                  if uuid_of(row["_uuid"]) in set_of(s["ports"]))
    client.transact(NB, [{"op": "mutate", "table": "Logical_Switch", "where": [["_uuid", "==", switch["_uuid"]]],
                          "mutations": [["ports", "delete", ["set", [row["_uuid"]]]]]}])


def _time_repair(ovn_sandbox, source, target_ip: str, remade) -> float:
    """Seconds until the ping answers again. Right after the delete it must fail,
    unless the worker's resync already remade the row (``remade()``): a delete
    that breaks nothing and is repaired by nothing fails the test."""
    started = time.monotonic()
    if pings(ovn_sandbox, source.id, target_ip):
        assert remade(), "the ping went on after the delete and nothing was remade: the row carried nothing"
    wait_ping(ovn_sandbox, source, target_ip, timeout=240)
    return time.monotonic() - started


def test_a_remote_port_deleted_by_hand_breaks_the_ping_until_isthmus_puts_it_back(ovn_sandbox, layout, stretched):
    servers, ips, ports = stretched["servers"], stretched["ips"], stretched["ports"]
    wait_ping(ovn_sandbox, servers["RegionOne"], ips["RegionTwo"])
    name = remote_port_name(ports["RegionTwo"].id)
    (before,) = nb(layout, "RegionOne").select(NB, "Logical_Switch_Port", [["name", "==", name]], ["name"])
    _delete_remote_port(layout, "RegionOne", ports["RegionTwo"].id)

    def remade() -> bool:
        rows = nb(layout, "RegionOne").select(NB, "Logical_Switch_Port", [["name", "==", name]], ["name"])
        return bool(rows) and rows[0]["_uuid"] != before["_uuid"]

    took = _time_repair(ovn_sandbox, servers["RegionOne"], ips["RegionTwo"], remade)
    print(f"remote port deleted by hand in RegionOne: answered again after {took:.1f}s")


def test_a_remote_chassis_deleted_by_hand_breaks_the_ping_until_isthmus_puts_it_back(ovn_sandbox, layout,
                                                                                    stretched):
    servers, ips = stretched["servers"], stretched["ips"]
    wait_ping(ovn_sandbox, servers["RegionTwo"], ips["RegionThree"])
    chassis = ovn.chassis_name("RegionThree")
    where = [["name", "==", chassis]]
    (before,) = sb(layout, "RegionTwo").select(SB, "Chassis", where, ["name"])
    sb(layout, "RegionTwo").transact(SB, [{"op": "delete", "table": "Chassis", "where": where}])

    def remade() -> bool:
        rows = sb(layout, "RegionTwo").select(SB, "Chassis", where, ["name"])
        return bool(rows) and rows[0]["_uuid"] != before["_uuid"]

    took = _time_repair(ovn_sandbox, servers["RegionTwo"], ips["RegionThree"], remade)
    print(f"remote chassis deleted by hand in RegionTwo: answered again after {took:.1f}s")


def test_a_neutron_update_of_the_local_port_keeps_the_agreed_keys(ovn_sandbox, layout, stretched):
    port = stretched["ports"]["RegionOne"]
    central = stretched["admin"][CENTRAL]

    def key_in(region: str, name: str) -> str | None:
        rows = nb(layout, region).select(NB, "Logical_Switch_Port", [["name", "==", name]], ["options"])
        return map_of(rows[0]["options"]).get(TNL_KEY) if rows else None

    agreed = key_in("RegionTwo", remote_port_name(port.id))
    assert agreed and key_in("RegionOne", port.id) == agreed
    group = central.network.create_security_group(name=f"ovn-extra-{uuid.uuid4().hex[:6]}",
                                                  project_id=port.project_id)
    central.network.update_port(port.id, name="renamed-by-a-user",
                                security_groups=[*port.security_group_ids, group.id])
    # Neutron rewrites the port's options on that update; the key comes back and
    # Southbound's binding never moves off it.
    eventually(lambda: key_in("RegionOne", port.id) == agreed, timeout=120, what="the local port's key restored")
    (binding,) = sb(layout, "RegionOne").select(SB, "Port_Binding", [["logical_port", "==", port.id]],
                                                ["tunnel_key"])
    assert str(binding["tunnel_key"]) == agreed
    wait_ping(ovn_sandbox, stretched["servers"]["RegionTwo"], stretched["ips"]["RegionOne"])


def test_neutrons_db_sync_in_repair_mode_leaves_isthmus_rows_alone(ovn_sandbox, layout, stretched):
    from isthmus.sandbox import neutron

    port_id = stretched["ports"]["RegionTwo"].id
    log = neutron.ovn_db_sync(layout, "RegionOne", "repair")
    assert "Neutron OVN DB sync" in log
    rows = nb(layout, "RegionOne").select(NB, "Logical_Switch_Port", [["name", "==", remote_port_name(port_id)]],
                                          ["type"])
    assert [r["type"] for r in rows] == ["remote"]
    chassis = sb(layout, "RegionOne").select(SB, "Chassis", [["name", "==", ovn.chassis_name("RegionTwo")]],
                                             ["other_config"])
    assert map_of(chassis[0]["other_config"]).get("is-remote") == "true"
    assert pings(ovn_sandbox, stretched["servers"]["RegionOne"].id, stretched["ips"]["RegionTwo"])


def test_a_remote_group_rule_across_ovn_regions_admits_exactly_its_members(ovn_sandbox, layout, stretched):
    """Each region's OVN enforces its own ports; the members of a remote group bound
    in other regions reach it through the region's address group (Isthmus' companion
    rule), which ML2/OVN turns into an address set."""
    central = stretched["admin"][CENTRAL]
    servers, ips, ports = stretched["servers"], stretched["ips"], stretched["ports"]
    one, two = ports["RegionOne"], ports["RegionTwo"]
    group = central.network.create_security_group(name=f"ovn-members-{uuid.uuid4().hex[:6]}",
                                                  project_id=one.project_id)
    for rule in list(central.network.security_group_rules(security_group_id=group.id, direction="ingress")):
        central.network.delete_security_group_rule(rule)
    before = {p.id: list(central.network.get_port(p.id).security_group_ids) for p in (one, two)}
    try:
        for port in (one, two):
            central.network.update_port(port.id, security_groups=[group.id])
        # No ingress rule: RegionTwo's OVN drops the echo requests from RegionOne.
        eventually(lambda: not pings(ovn_sandbox, servers["RegionOne"].id, ips["RegionTwo"]), timeout=120,
                   what="the ping refused without an ingress rule")
        central.network.create_security_group_rule(security_group_id=group.id, direction="ingress",
                                                   ethertype="IPv4", protocol="icmp", remote_group_id=group.id)
        took = wait_ping(ovn_sandbox, servers["RegionOne"], ips["RegionTwo"], timeout=180)
        print(f"remote-group rule added: RegionOne -> RegionTwo answered after {took:.1f}s")
        # RegionThree's server is not a member: still refused.
        assert not pings(ovn_sandbox, servers["RegionThree"].id, ips["RegionTwo"])
    finally:
        for port_id, groups in before.items():
            central.network.update_port(port_id, security_groups=groups)


def test_the_topology_shows_each_regions_backend_and_its_remote_ports(ovn_sandbox, stretched):
    result = isthmus_cli(ovn_sandbox, "multiregion", "topology")
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in result.splitlines()
            if line.startswith("|")]
    # The region table: every OVN region says so.
    backends = {r[0]: r[3] for r in rows if len(r) == 5 and r[0] in ovn_sandbox.regions}
    assert backends == {region: "ovn" for region in ovn_sandbox.regions}, result
    server_one = stretched["servers"]["RegionOne"].name
    # The network's row in RegionTwo carries RegionOne's server among its remote ports.
    network_rows = [r for r in rows if len(r) == 7]
    start = next(i for i, r in enumerate(network_rows) if stretched["network"].id in r[0])
    band = [network_rows[start], *[r for r in network_rows[start + 1:start + 1 + len(ovn_sandbox.regions)]]]
    (two,) = [r for r in band if r[1] == "RegionTwo"]
    assert two[5].startswith("remote: ") and server_one in two[5], result


def isthmus_cli(sandbox, *args: str) -> str:
    import subprocess
    import sys

    openstack = str(Path(sys.executable).parent / "openstack")
    done = subprocess.run([openstack, "--os-cloud", "isthmus-admin", *args], capture_output=True, text=True,
                          env=sandbox.env(), timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_router_with_subnets_in_two_ovn_regions_routes_between_them(ovn_sandbox, layout, stretched):
    """Router halves on OVN logical routers; the halves' transit ports, which no
    OVN region binds, reach each other as remote ports."""
    central = ovn_sandbox.connect(CENTRAL)
    one, two = ovn_sandbox.regions[:2]
    zones = {r: layout.availability_zone(r) for r in (one, two)}
    name = f"ovn-rt-{uuid.uuid4().hex[:6]}"
    networks, router = [], None
    servers: list = []
    try:
        subnets = {}
        for region, cidr in ((one, "10.78.1.0/24"), (two, "10.78.2.0/24")):
            network = central.network.create_network(name=f"{name}-{region}", availability_zone_hints=[zones[region]])
            networks.append(network)
            subnets[region] = central.network.create_subnet(network_id=network.id, ip_version=4, cidr=cidr)
        router = central.network.create_router(name=name)
        for subnet in subnets.values():
            central.network.add_interface_to_router(router.id, subnet_id=subnet.id)
        booted = {region: boot_all(ovn_sandbox, name, network.id, (region,))[region]
                  for region, network in zip((one, two), networks, strict=True)}
        servers = list(booted.items())
        ips = {r: ip_of(port_of(stretched["admin"], r, s)) for r, s in booted.items()}
        took = wait_ping(ovn_sandbox, booted[one], ips[two], timeout=240)
        wait_ping(ovn_sandbox, booted[two], ips[one], timeout=240)
        print(f"routed across OVN regions: answered after {took:.1f}s")
        from tests.integration.test_dataplane import sandbox_exec

        trace = sandbox_exec(ovn_sandbox, booted[one].id, "ping", "-c", "1", "-W", "2", ips[two])
        assert "ttl=62" in trace.stdout, trace.stdout  # both halves on the way
    finally:
        for region, server in servers:
            conn = ovn_sandbox.connect(region)
            conn.compute.delete_server(server, ignore_missing=True)
            conn.compute.wait_for_delete(server, wait=120)
        if router is not None:
            for port in central.network.ports(device_id=router.id, device_owner="network:router_interface"):
                central.network.remove_interface_from_router(router.id, port=port.id)
            central.network.delete_router(router.id, ignore_missing=True)
        for network in networks:
            eventually(lambda n=network: delete_network(central, n.id), timeout=120, what=f"delete {network.id}")


def test_a_region_whose_ovn_hangs_blocks_no_other_region_and_catches_up(ovn_sandbox, layout, stretched):
    """RegionThree's Northbound and Southbound stop answering (SIGSTOP: connections
    open, nothing comes back): a new server in RegionOne still reaches RegionTwo;
    once RegionThree answers again it carries the new server too, with no action."""
    import json
    import signal

    records = [json.loads((layout.run / f"ovn-{db}-RegionThree.json").read_text()) for db in ("nb", "sb")]
    network_id = stretched["network"].id
    frozen, new = True, None
    for record in records:
        os.kill(record["pid"], signal.SIGSTOP)
    try:
        started = time.monotonic()
        new = boot_all(ovn_sandbox, f"{stretched['network'].name}-late", network_id, ("RegionOne",))["RegionOne"]
        new_ip = ip_of(port_of(stretched["admin"], "RegionOne", new))
        took = wait_ping(ovn_sandbox, stretched["servers"]["RegionTwo"], new_ip, timeout=180)
        print(f"RegionThree's OVN frozen: RegionTwo reached the new server {took:.1f}s after it was ACTIVE "
              f"({time.monotonic() - started:.1f}s after the boot began)")
        assert not pings(ovn_sandbox, stretched["servers"]["RegionThree"].id, new_ip)
        for record in records:
            os.kill(record["pid"], signal.SIGCONT)
        frozen = False
        took = wait_ping(ovn_sandbox, stretched["servers"]["RegionThree"], new_ip, timeout=240)
        print(f"RegionThree's OVN answering again: it reached the new server after {took:.1f}s")
    finally:
        if frozen:
            for record in records:
                os.kill(record["pid"], signal.SIGCONT)
        if new is not None:
            ovn_sandbox.connect("RegionOne").compute.delete_server(new, ignore_missing=True)


def test_a_restarted_open_vswitch_comes_back_wired(ovn_sandbox, layout, stretched):
    """ovs-vswitchd of RegionTwo's chassis killed and started again (its flows and
    the bridge's device go with it): ovn-controller programs it again and the
    underlay address returns to br-ul; the cross-region ping answers again."""
    servers, ips = stretched["servers"], stretched["ips"]
    wait_ping(ovn_sandbox, servers["RegionOne"], ips["RegionTwo"])
    isthmus("sandbox", "restart", "ovs-vswitchd-RegionTwo", "--state-dir", str(layout.state_dir))
    took = wait_ping(ovn_sandbox, servers["RegionOne"], ips["RegionTwo"], timeout=120)
    print(f"ovs-vswitchd of RegionTwo restarted: answered again after {took:.1f}s")
