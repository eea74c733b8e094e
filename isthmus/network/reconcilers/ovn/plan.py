"""What one OVN region must hold for one stretched network, and the OVSDB
operations that get it there (pure: the unit tests read them).

Rows Neutron owns (its logical switch ``neutron-<network>``, a logical switch
port per Neutron port) get one option each, never more: the agreed tunnel key
(``requested-tnl-key``), written as a map mutation so Neutron's other keys stay
as they are. Rows Isthmus owns (remote ports, remote chassis) carry only
``isthmus:*`` external ids, no ``neutron:*`` ones, so ML2/OVN's db-sync and
maintenance never take them for their own (docs/ovn.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from isthmus.clients.ovsdb import map_of, named, omap, oset, set_of, uuid, uuid_of

TNL_KEY = "requested-tnl-key"
EXT_PORT = "isthmus:remote-port"  # on a remote port: the port's id
EXT_NETWORK = "isthmus:network"
EXT_REGION = "isthmus:region"  # where the port (or chassis) lives
EXT_CHASSIS = "isthmus:remote-chassis"  # on a remote chassis: its home region


def switch_name(network_id: str) -> str:
    """ML2/OVN's name of a network's logical switch."""
    return f"neutron-{network_id}"


def remote_port_name(port_id: str) -> str:
    # Not the port id itself: ML2/OVN names its own port so, and a Neutron copy
    # of the port made here later must not collide with ours (names are unique).
    return f"isthmus-remote-{port_id}"


@dataclass(frozen=True)
class RemoteChassis:
    """A hypervisor of another region, as that region's Southbound shows it."""

    name: str
    hostname: str
    encap_type: str
    encap_ip: str
    region: str


@dataclass(frozen=True)
class RemotePort:
    port_id: str
    network_id: str
    region: str
    chassis: str  # the RemoteChassis' name
    addresses: str  # "MAC IP [IP...]", as OVN's addresses column
    tunnel_key: int


@dataclass(frozen=True)
class Wanted:
    """One network in one OVN region."""

    network_id: str
    network_key: int
    local_keys: Mapping[str, int]  # port id -> key: ports bound in this region (Neutron's rows)
    remote_ports: Mapping[str, RemotePort]
    chassis: Mapping[str, RemoteChassis]
    # Remote ports of ours to remove: their port's delete is proven, or the port
    # is now bound here or nowhere (central's word, read now), never a mere absence.
    removable: frozenset[str] = frozenset()


@dataclass
class Observed:
    """The region's rows the plan compares with (ovsdb ``select`` rows)."""

    switch: dict[str, Any] | None
    ports: Mapping[str, dict[str, Any]] = field(default_factory=dict)  # by name: Neutron's and ours
    chassis: Mapping[str, dict[str, Any]] = field(default_factory=dict)  # by name, each with its "encap" row


@dataclass
class Operations:
    southbound: list[dict[str, Any]] = field(default_factory=list)
    northbound: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the operations do, for the log

    def __bool__(self) -> bool:
        return bool(self.southbound or self.northbound)


def set_option(table: str, row_uuid: str, column: str, key: str, value: str) -> list[dict[str, Any]]:
    """One key of a map column, the rest untouched (delete then insert: OVSDB's
    insert mutation keeps an existing key's old value)."""
    where = [["_uuid", "==", uuid(row_uuid)]]
    return [{"op": "mutate", "table": table, "where": where, "mutations": [[column, "delete", oset([key])]]},
            {"op": "mutate", "table": table, "where": where, "mutations": [[column, "insert", omap({key: value})]]}]


def is_ours(row: Mapping[str, Any]) -> bool:
    return EXT_PORT in map_of(row.get("external_ids"))


def plan(wanted: Wanted, observed: Observed) -> Operations:
    ops = Operations()
    switch = observed.switch
    if switch is None:
        return ops  # the region holds no copy of the network: nothing to stretch here
    switch_uuid = uuid_of(switch["_uuid"])
    assert switch_uuid
    key = str(wanted.network_key)
    if map_of(switch.get("other_config")).get(TNL_KEY) != key:
        ops.northbound += set_option("Logical_Switch", switch_uuid, "other_config", TNL_KEY, key)
        ops.notes.append(f"switch key {key}")
    for port_id, port_key in sorted(wanted.local_keys.items()):
        row = observed.ports.get(port_id)
        if row is not None and not is_ours(row) and map_of(row.get("options")).get(TNL_KEY) != str(port_key):
            ops.northbound += set_option("Logical_Switch_Port", uuid_of(row["_uuid"]) or "", "options", TNL_KEY,
                                         str(port_key))
            ops.notes.append(f"port {port_id} key {port_key}")
    _plan_chassis(wanted, observed, ops)
    _plan_remote_ports(wanted, observed, switch_uuid, ops)
    return ops


def _plan_chassis(wanted: Wanted, observed: Observed, ops: Operations) -> None:
    needed = {p.chassis for p in wanted.remote_ports.values() if p.port_id not in wanted.removable}
    for name in sorted(needed):
        chassis = wanted.chassis[name]
        row = observed.chassis.get(name)
        if row is None:
            encap = f"encap_{len(ops.southbound)}"
            ops.southbound += [
                {"op": "insert", "table": "Encap", "uuid-name": encap,
                 "row": {"type": chassis.encap_type, "ip": chassis.encap_ip, "chassis_name": name,
                         "options": omap({"csum": "true"})}},
                {"op": "insert", "table": "Chassis",
                 "row": {"name": name, "hostname": chassis.hostname, "encaps": named(encap),
                         "other_config": omap({"is-remote": "true"}),
                         "external_ids": omap({EXT_CHASSIS: chassis.region})}},
            ]
            ops.notes.append(f"remote chassis {name} ({chassis.region}, {chassis.encap_ip})")
            continue
        if EXT_CHASSIS not in map_of(row.get("external_ids")):
            ops.notes.append(f"chassis {name} is this region's own: a remote chassis of that name is not made")
            continue
        present = row.get("encap") or {}
        if (present.get("ip"), present.get("type")) != (chassis.encap_ip, chassis.encap_type) and present.get("_uuid"):
            ops.southbound.append({"op": "update", "table": "Encap", "where": [["_uuid", "==", present["_uuid"]]],
                                   "row": {"ip": chassis.encap_ip, "type": chassis.encap_type}})
            ops.notes.append(f"remote chassis {name} now at {chassis.encap_ip}")


def remote_port_row(port: RemotePort) -> dict[str, Any]:
    return {
        "name": remote_port_name(port.port_id),
        "type": "remote",
        "addresses": port.addresses,
        "options": omap({"requested-chassis": port.chassis, TNL_KEY: str(port.tunnel_key)}),
        "external_ids": omap({EXT_PORT: port.port_id, EXT_NETWORK: port.network_id, EXT_REGION: port.region}),
    }


def _differs(row: Mapping[str, Any], port: RemotePort) -> bool:
    options = map_of(row.get("options"))
    return (set_of(row.get("addresses")) != [port.addresses]
            or options.get("requested-chassis") != port.chassis
            or options.get(TNL_KEY) != str(port.tunnel_key)
            or row.get("type") != "remote"
            or map_of(row.get("external_ids")).get(EXT_REGION) != port.region)


def _plan_remote_ports(wanted: Wanted, observed: Observed, switch_uuid: str, ops: Operations) -> None:
    for port_id in sorted(wanted.removable):
        row = observed.ports.get(remote_port_name(port_id))
        if row is not None and is_ours(row):
            ops.northbound.append({"op": "mutate", "table": "Logical_Switch", "where": [["_uuid", "==",
                                                                                        uuid(switch_uuid)]],
                                   "mutations": [["ports", "delete", oset([row["_uuid"]])]]})
            ops.notes.append(f"remote port {port_id} removed")
    own_chassis = {n for n, row in observed.chassis.items() if EXT_CHASSIS not in map_of(row.get("external_ids"))}
    for port_id, port in sorted(wanted.remote_ports.items()):
        if port_id in wanted.removable:
            continue
        if port.chassis in own_chassis:
            continue  # never point a remote port at one of the region's own hypervisors
        row = observed.ports.get(remote_port_name(port_id))
        if row is None:
            name = f"lsp_{len(ops.northbound)}"
            ops.northbound += [
                {"op": "insert", "table": "Logical_Switch_Port", "uuid-name": name, "row": remote_port_row(port)},
                {"op": "mutate", "table": "Logical_Switch", "where": [["_uuid", "==", uuid(switch_uuid)]],
                 "mutations": [["ports", "insert", oset([named(name)])]]},
            ]
            ops.notes.append(f"remote port {port_id} ({port.region}, key {port.tunnel_key})")
        elif is_ours(row) and _differs(row, port):
            body = remote_port_row(port)
            del body["name"]
            ops.northbound.append({"op": "update", "table": "Logical_Switch_Port",
                                   "where": [["_uuid", "==", row["_uuid"]]], "row": body})
            ops.notes.append(f"remote port {port_id} updated")


def unreferenced_chassis(chassis_rows: list[dict[str, Any]], remote_ports: list[dict[str, Any]]) -> list[str]:
    """Our remote chassis no remote port of ours names any more (their names)."""
    wanted = {map_of(p.get("options")).get("requested-chassis") for p in remote_ports if is_ours(p)}
    return sorted(row["name"] for row in chassis_rows
                  if EXT_CHASSIS in map_of(row.get("external_ids")) and row["name"] not in wanted)
