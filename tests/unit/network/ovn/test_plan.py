"""The OVN wiring's planner: which OVSDB operations make a region hold a network's
agreed keys, remote chassis and remote ports (isthmus/network/reconcilers/ovn)."""

import dataclasses

from isthmus.clients.ovsdb import map_of, omap, oset, uuid
from isthmus.network.reconcilers.ovn.plan import (
    EXT_CHASSIS,
    EXT_PORT,
    TNL_KEY,
    Observed,
    RemoteChassis,
    RemotePort,
    Wanted,
    plan,
    remote_port_name,
    unreferenced_chassis,
)

SWITCH = {"_uuid": uuid("ls-1"), "name": "neutron-net", "other_config": omap({"mcast_snoop": "false"})}
HOST2 = RemoteChassis("regiontwo-compute", "regiontwo-compute", "geneve", "192.0.2.2", "RegionTwo")
REMOTE = RemotePort("p2", "net", "RegionTwo", "regiontwo-compute", "fa:16:3e:00:00:02 10.0.0.2", 2)


def wanted(**changes) -> Wanted:
    base = Wanted(network_id="net", network_key=16711681, local_keys={"p1": 1}, remote_ports={"p2": REMOTE},
                  chassis={HOST2.name: HOST2})
    return dataclasses.replace(base, **changes)


def neutron_port(name, options=None):
    return {"_uuid": uuid(f"lsp-{name}"), "name": name, "type": "", "options": omap(options or {}),
            "external_ids": omap({"neutron:network_name": "neutron-net"})}


def our_port(port: RemotePort, **row):
    body = {"_uuid": uuid(f"lsp-r-{port.port_id}"), "name": remote_port_name(port.port_id), "type": "remote",
            "addresses": port.addresses,
            "options": omap({"requested-chassis": port.chassis, TNL_KEY: str(port.tunnel_key)}),
            "external_ids": omap({EXT_PORT: port.port_id, "isthmus:network": "net", "isthmus:region": port.region})}
    body.update(row)
    return body


def our_chassis(chassis: RemoteChassis, ip=None):
    return {"_uuid": uuid(f"ch-{chassis.name}"), "name": chassis.name,
            "external_ids": omap({EXT_CHASSIS: chassis.region}),
            "encap": {"_uuid": uuid(f"en-{chassis.name}"), "type": chassis.encap_type, "ip": ip or chassis.encap_ip}}


def test_a_region_without_the_network_gets_nothing():
    assert not plan(wanted(), Observed(switch=None))


def test_first_pass_sets_both_keys_on_neutrons_rows_by_one_key_each_and_adds_chassis_and_remote_port():
    ops = plan(wanted(), Observed(switch=SWITCH, ports={"p1": neutron_port("p1", {"requested-chassis": "h1"})}))
    nb = ops.northbound
    # Neutron's rows: a delete and an insert of the one key, never a whole-column write.
    mutations = [op for op in nb if op["op"] == "mutate" and op["table"] in ("Logical_Switch", "Logical_Switch_Port")
                 and op["mutations"][0][0] in ("other_config", "options")]
    assert [(op["table"], op["mutations"][0][1]) for op in mutations] == [
        ("Logical_Switch", "delete"), ("Logical_Switch", "insert"),
        ("Logical_Switch_Port", "delete"), ("Logical_Switch_Port", "insert")]
    assert mutations[1]["mutations"][0][2] == omap({TNL_KEY: "16711681"})
    assert mutations[3]["mutations"][0][2] == omap({TNL_KEY: "1"})
    assert not [op for op in nb if op["op"] == "update"]
    # The remote chassis, in the Southbound: is-remote, its encap, marked ours.
    encap, chassis = ops.southbound
    assert encap["row"] == {"type": "geneve", "ip": "192.0.2.2", "chassis_name": "regiontwo-compute",
                            "options": omap({"csum": "true"})}
    assert map_of(chassis["row"]["other_config"]) == {"is-remote": "true"}
    assert map_of(chassis["row"]["external_ids"]) == {EXT_CHASSIS: "RegionTwo"}
    # The remote port: its own name, type remote, the agreed key, no neutron:* ids.
    insert = next(op for op in nb if op["op"] == "insert")
    row = insert["row"]
    assert row["name"] == "isthmus-remote-p2" and row["type"] == "remote"
    assert map_of(row["options"]) == {"requested-chassis": "regiontwo-compute", TNL_KEY: "2"}
    assert not [k for k in map_of(row["external_ids"]) if k.startswith("neutron:")]


def test_a_converged_region_gets_no_operation():
    switch = {**SWITCH, "other_config": omap({"mcast_snoop": "false", TNL_KEY: "16711681"})}
    observed = Observed(switch=switch, ports={"p1": neutron_port("p1", {TNL_KEY: "1"}),
                                              remote_port_name("p2"): our_port(REMOTE)},
                        chassis={HOST2.name: our_chassis(HOST2)})
    assert not plan(wanted(), observed)


def test_a_key_neutron_dropped_on_update_is_put_back_and_a_moved_port_is_updated_not_recreated():
    moved = RemotePort("p2", "net", "RegionThree", "regionthree-compute", REMOTE.addresses, 2)
    host3 = RemoteChassis("regionthree-compute", "regionthree-compute", "geneve", "192.0.2.3", "RegionThree")
    switch = {**SWITCH, "other_config": omap({TNL_KEY: "16711681"})}
    observed = Observed(switch=switch, ports={"p1": neutron_port("p1", {"requested-chassis": "h1"}),
                                              remote_port_name("p2"): our_port(REMOTE)},
                        chassis={HOST2.name: our_chassis(HOST2)})
    ops = plan(wanted(remote_ports={"p2": moved}, chassis={host3.name: host3}), observed)
    assert "port p1 key 1" in ops.notes
    update = next(op for op in ops.northbound if op["op"] == "update")
    assert map_of(update["row"]["options"])["requested-chassis"] == "regionthree-compute"
    assert [op["table"] for op in ops.southbound] == ["Encap", "Chassis"]


def test_a_remote_port_goes_only_when_its_removal_is_proven():
    observed = Observed(switch={**SWITCH, "other_config": omap({TNL_KEY: "16711681"})},
                        ports={remote_port_name("p2"): our_port(REMOTE)}, chassis={HOST2.name: our_chassis(HOST2)})
    # Not wanted any more but not proven gone (a filtered list, an outage): kept.
    assert not plan(wanted(local_keys={}, remote_ports={}), observed)
    ops = plan(wanted(local_keys={}, removable=frozenset({"p2"})), observed)
    assert ops.northbound == [{"op": "mutate", "table": "Logical_Switch", "where": [["_uuid", "==", uuid("ls-1")]],
                               "mutations": [["ports", "delete", oset([uuid("lsp-r-p2")])]]}]


def test_rows_that_are_not_ours_are_never_changed_or_removed():
    # A Neutron port named like ours, and a chassis of the region's own with a remote's name.
    theirs = {**neutron_port(remote_port_name("p2")), "addresses": "something else"}
    own = {"_uuid": uuid("ch-own"), "name": HOST2.name, "external_ids": omap({}),
           "encap": {"_uuid": uuid("en-own"), "type": "geneve", "ip": "10.9.9.9"}}
    observed = Observed(switch={**SWITCH, "other_config": omap({TNL_KEY: "16711681"})},
                        ports={"p1": neutron_port("p1", {TNL_KEY: "1"}), remote_port_name("p2"): theirs},
                        chassis={HOST2.name: own})
    ops = plan(wanted(removable=frozenset({"p2"})), observed)
    assert not ops
    ops = plan(wanted(), observed)
    assert not ops.southbound and not ops.northbound  # never pointed at the region's own hypervisor


def test_a_changed_encap_address_is_updated_in_place():
    observed = Observed(switch={**SWITCH, "other_config": omap({TNL_KEY: "16711681"})},
                        ports={"p1": neutron_port("p1", {TNL_KEY: "1"}), remote_port_name("p2"): our_port(REMOTE)},
                        chassis={HOST2.name: our_chassis(HOST2, ip="192.0.2.99")})
    ops = plan(wanted(), observed)
    assert ops.southbound == [{"op": "update", "table": "Encap",
                               "where": [["_uuid", "==", uuid("en-regiontwo-compute")]],
                               "row": {"ip": "192.0.2.2", "type": "geneve"}}]
    assert not ops.northbound


def test_only_our_unreferenced_chassis_are_collected():
    rows = [{"name": "a", "external_ids": omap({EXT_CHASSIS: "R2"})},
            {"name": "b", "external_ids": omap({EXT_CHASSIS: "R2"})}, {"name": "own", "external_ids": omap({})}]
    ports = [our_port(RemotePort("p", "net", "R2", "a", "fa:16:3e:00:00:01 10.0.0.1", 1)),
             {"name": "x", "type": "remote", "options": omap({"requested-chassis": "b"}), "external_ids": omap({})}]
    # "b" is named only by a remote port that is not ours: ours to collect.
    assert unreferenced_chassis(rows, ports) == ["b"]
