"""One OVN region's Northbound and Southbound databases, as the wiring reads and
writes them (a handful of ``select``s and at most two transactions per call)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from isthmus.clients.ovsdb import OvsdbClient, includes, map_of, set_of, uuid_of
from isthmus.network.reconcilers.ovn.plan import (
    EXT_CHASSIS,
    EXT_NETWORK,
    Observed,
    Operations,
    RemoteChassis,
    switch_name,
)

NB = "OVN_Northbound"
SB = "OVN_Southbound"
PORT_COLUMNS = ["name", "type", "addresses", "options", "external_ids"]


@dataclass(frozen=True)
class OvnRegion:
    name: str
    nb: OvsdbClient
    sb: OvsdbClient

    def observe(self, network_id: str, port_names: Iterable[str] | None = None) -> Observed:
        """The network's switch, its ports (only ``port_names`` when given: one
        port's event reads one port), and every chassis of the region."""
        selects: list[dict[str, Any]] = [
            {"op": "select", "table": "Logical_Switch", "where": [["name", "==", switch_name(network_id)]],
             "columns": ["_uuid", "name", "other_config"]}]
        if port_names is None:
            conditions = [[includes("external_ids", {"neutron:network_name": switch_name(network_id)})],
                          [includes("external_ids", {EXT_NETWORK: network_id})]]
        else:
            conditions = [[["name", "==", name]] for name in sorted(set(port_names))]
        selects += [{"op": "select", "table": "Logical_Switch_Port", "where": where,
                     "columns": ["_uuid", *PORT_COLUMNS]} for where in conditions]
        answers = self.nb.transact(NB, selects)
        switches = answers[0]["rows"]
        if not switches:
            return Observed(switch=None)  # no copy of the network here: nothing more to read
        ports = {row["name"]: row for answer in answers[1:] for row in answer["rows"]}
        return Observed(switch=switches[0], ports=ports, chassis=self.chassis_rows())

    def chassis_rows(self) -> dict[str, dict[str, Any]]:
        """Every chassis by name, each with its first encap as ``encap``."""
        chassis, encaps = self.sb.transact(SB, [
            {"op": "select", "table": "Chassis", "where": [],
             "columns": ["_uuid", "name", "hostname", "encaps", "external_ids", "other_config"]},
            {"op": "select", "table": "Encap", "where": [], "columns": ["_uuid", "type", "ip"]},
        ])
        by_uuid = {uuid_of(row["_uuid"]): row for row in encaps["rows"]}
        found = {}
        for row in chassis["rows"]:
            first = next((by_uuid[u] for u in set_of(row.get("encaps")) if u in by_uuid), None)
            found[row["name"]] = {**row, "encap": first}
        return found

    def hypervisor(self, host: str) -> RemoteChassis | None:
        """The region's own chassis of a host (ML2/OVN binds a port to the chassis
        whose hostname is the port's ``binding:host_id``), as other regions must
        know it; None when no chassis of that host is registered."""
        return self._own_chassis(lambda row: row.get("hostname") == host)

    def gateway(self) -> RemoteChassis | None:
        """The region's first interconnection chassis (by name): other regions reach
        the region's distributed router ports through it."""
        return self._own_chassis(lambda row: map_of(row.get("other_config")).get("is-interconn") == "true")

    def _own_chassis(self, chosen: Callable[[dict[str, Any]], bool]) -> RemoteChassis | None:
        """The first (by name) of the region's own chassis with an encap that
        ``chosen`` accepts, as other regions must know it (never one of our
        remote chassis)."""
        for name, row in sorted(self.chassis_rows().items()):
            encap = row.get("encap")
            if encap and EXT_CHASSIS not in map_of(row.get("external_ids")) and chosen(row):
                return RemoteChassis(name=name, hostname=row.get("hostname") or name, encap_type=encap["type"],
                                     encap_ip=encap["ip"], region=self.name)
        return None

    def apply(self, ops: Operations) -> None:
        """Southbound first: a remote port's chassis exists before the port names it."""
        if ops.southbound:
            self.sb.transact(SB, ops.southbound)
        if ops.northbound:
            self.nb.transact(NB, ops.northbound)

    def remote_ports(self) -> list[dict[str, Any]]:
        """Every remote port of ours in the region (any network)."""
        return self.nb.select(NB, "Logical_Switch_Port", [["type", "==", "remote"]], PORT_COLUMNS)

    def delete_chassis(self, names: list[str]) -> None:
        if names:
            self.sb.transact(SB, [{"op": "delete", "table": "Chassis", "where": [["name", "==", n]]} for n in names])
