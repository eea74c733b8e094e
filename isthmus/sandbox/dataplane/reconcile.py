"""The commands that turn a host's present state into its wiring (pure planning:
the agent runs them, the unit tests read them).

Only links this dataplane names (``brq*``, ``vxlan-*``, ``tap*``) and server
namespaces with the agent's own prefix are ever changed or removed.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from isthmus.sandbox.dataplane import names
from isthmus.sandbox.dataplane.kernel import ZERO_MAC, Command, HostState, ServerInterface
from isthmus.sandbox.dataplane.wiring import HostWiring, NetworkWiring, Server, Vif

MANAGED_PREFIXES = ("brq", "vxlan-", "tap", "out")


@dataclass(frozen=True)
class OvsPlug:
    """An OVN region's host: a server's tap goes into Open vSwitch's integration
    bridge with the port's id as ``iface-id`` (what Nova's OVS VIF plug does), and
    ovn-controller binds it. ``vsctl``/``ethtool``: argv prefixes of those tools."""

    vsctl: tuple[str, ...]
    ethtool: tuple[str, ...]
    bridge: str = "br-int"

    def plug(self, tap: str, vif: Vif) -> list[Command]:
        return [[*self.vsctl, "--may-exist", "add-port", self.bridge, tap, "--", "set", "Interface", tap,
                 f"external_ids:iface-id={vif.port_id}", f"external_ids:attached-mac={vif.mac}",
                 "external_ids:iface-status=active"]]

    def unplug(self, tap: str) -> list[Command]:
        return [[*self.vsctl, "--if-exists", "del-port", self.bridge, tap]]

    def offload_off(self, server_ns: str, name: str) -> list[Command]:
        # The userspace datapath fills no checksums: TCP from a server needs
        # transmit offload off on its end (ping does not care).
        return [["ip", "netns", "exec", server_ns, *self.ethtool, "-K", name, "tx", "off"]]


def network_commands(host_ns: str, local_ip: str, wiring: HostWiring, state: HostState) -> list[Command]:
    """Bridges and VXLAN devices of the wanted networks, their forwarding entries
    (remote MACs and flooding) and the ARP answers for remote addresses."""
    ip = ["ip", "-n", host_ns]
    cmds: list[Command] = []
    for net in wiring.networks.values():
        bridge = names.bridge(net.network_id)
        if bridge not in state.links:
            cmds += [[*ip, "link", "add", "name", bridge, "type", "bridge"], [*ip, "link", "set", bridge, "up"]]
        if net.vni is None:
            continue
        vxlan = names.vxlan(net.vni)
        present = state.links.get(vxlan)
        if present is None:
            # proxy: ARP requests are answered from the neighbour entries below,
            # never flooded (l2population's ARP responder): a wrong IP or MAC in
            # Neutron leaves them unanswered or answered wrongly.
            cmds += [[*ip, "link", "add", "name", vxlan, "type", "vxlan", "id", str(net.vni), "local", local_ip,
                      "dstport", str(names.VXLAN_PORT), "dev", names.UNDERLAY_LINK, "nolearning", "proxy"],
                     [*ip, "link", "set", vxlan, "master", bridge, "up"]]
        elif present.master != bridge:
            cmds.append([*ip, "link", "set", vxlan, "master", bridge, "up"])
        cmds += _forwarding_commands(host_ns, vxlan, net, state)
    return cmds


def _forwarding_commands(host_ns: str, vxlan: str, net: NetworkWiring, state: HostState) -> list[Command]:
    want_fdb = {(vxlan, p.mac, p.vtep) for p in net.remote_ports} | {(vxlan, ZERO_MAC, v) for v in net.flood_vteps}
    have_fdb = {e for e in state.fdb if e[0] == vxlan}
    want_arp = {(vxlan, addr, p.mac) for p in net.remote_ports for addr in p.ips}
    have_arp = {e for e in state.neighbours if e[0] == vxlan}
    cmds: list[Command] = []
    for _, mac, vtep in sorted(have_fdb - want_fdb):
        cmds.append(["bridge", "-n", host_ns, "fdb", "del", mac, "dev", vxlan, "dst", vtep, "self"])
    for _, addr, _mac in sorted(have_arp - want_arp):
        cmds.append(["ip", "-n", host_ns, "neigh", "del", addr, "dev", vxlan])
    for _, mac, vtep in sorted(want_fdb - have_fdb):
        # Flooding needs one default entry per tunnel IP (append); a MAC has one place (replace).
        verb = "append" if mac == ZERO_MAC else "replace"
        cmds.append(["bridge", "-n", host_ns, "fdb", verb, mac, "dev", vxlan, "dst", vtep, "self", "permanent"])
    for _, addr, mac in sorted(want_arp - have_arp):
        cmds.append(["ip", "-n", host_ns, "neigh", "replace", addr, "lladdr", mac, "dev", vxlan, "nud", "permanent"])
    return cmds


def removal_commands(host_ns: str, wiring: HostWiring, state: HostState, server_namespaces: set[str],
                     ns_prefix: str, ovs: OvsPlug | None = None) -> list[Command]:
    """Servers, taps (a server's or a router's), outside links, VXLAN devices and
    bridges nothing wants any more, servers first. Router and outside namespaces
    are ``router_reconcile``'s."""
    ip = ["ip", "-n", host_ns]
    want_servers = {names.object_namespace(ns_prefix, sid) for sid in wiring.servers}
    want_taps = {names.tap(v.port_id) for s in wiring.servers.values() for v in s.vifs}
    want_taps |= {names.tap(p.port_id) for r in wiring.routers.values() for p in r.ports}
    want_taps |= {names.outside_link(n) for n in wiring.outsides}
    want_bridges = {names.bridge(n) for n in wiring.networks}
    want_vxlans = {names.vxlan(n.vni) for n in wiring.networks.values() if n.vni is not None}
    cmds: list[Command] = []
    for link in sorted(state.links):
        if link.startswith(("tap", "out")) and link not in want_taps:
            cmds += [*(ovs.unplug(link) if ovs else []), [*ip, "link", "del", link]]
    for ns in sorted(server_namespaces - want_servers):
        cmds.append(["ip", "netns", "delete", ns])
    for link in sorted(state.links):
        if ((link.startswith("vxlan-") and link not in want_vxlans)
                or (link.startswith("brq") and link not in want_bridges)):
            cmds.append([*ip, "link", "del", link])
    return cmds


def server_commands(host_ns: str, server_ns: str, server: Server, interfaces: list[ServerInterface] | None,
                    routes: set[str], state: HostState, ovs: OvsPlug | None = None) -> list[Command]:
    """Make the server's namespace hold one interface per port with the port's MAC,
    addresses and MTU, plugged into its network's bridge (``ovs``: into Open
    vSwitch), and a default route to its first port's gateway. ``interfaces``
    None: the namespace does not exist."""
    sip = ["ip", "-n", server_ns]
    hip = ["ip", "-n", host_ns]
    cmds: list[Command] = []
    if interfaces is None:
        cmds += [["ip", "netns", "add", server_ns], [*sip, "link", "set", "lo", "up"]]
        interfaces = []
    by_port = {i.port_id: i for i in interfaces}
    taken = {i.name for i in interfaces}
    for vif in server.vifs:
        tap, bridge = names.tap(vif.port_id), names.bridge(vif.network_id)
        iface = by_port.get(vif.port_id)
        if iface is None:
            name = next(f"eth{n}" for n in range(len(taken) + 1) if f"eth{n}" not in taken)
            taken.add(name)
            if tap in state.links:  # a leftover whose server side is gone
                cmds.append([*hip, "link", "del", tap])
            cmds += [[*hip, "link", "add", "name", tap, "type", "veth", "peer", "name", name, "netns", server_ns],
                     [*sip, "link", "set", name, "address", vif.mac, "mtu", str(vif.mtu), "alias", vif.port_id, "up"],
                     *[[*sip, "addr", "add", a, "dev", name, *nodad(a)] for a in vif.addresses]]
            if ovs is None:
                cmds.append([*hip, "link", "set", tap, "master", bridge, "mtu", str(vif.mtu), "up"])
            else:
                cmds += [[*hip, "link", "set", tap, "mtu", str(vif.mtu), "up"], *ovs.plug(tap, vif),
                         *ovs.offload_off(server_ns, name)]
            continue
        if iface.mac != vif.mac or iface.mtu != vif.mtu:
            cmds.append([*sip, "link", "set", iface.name, "address", vif.mac, "mtu", str(vif.mtu), "up"])
        for addr in sorted(set(iface.addresses) - set(vif.addresses)):
            cmds.append([*sip, "addr", "del", addr, "dev", iface.name])
        for addr in [a for a in vif.addresses if a not in iface.addresses]:
            cmds.append([*sip, "addr", "add", addr, "dev", iface.name, *nodad(addr)])
        host_side = state.links.get(tap)
        if ovs is not None:
            cmds += ovs.plug(tap, vif)  # idempotent: a restarted OVS forgot nothing, a fresh one learns it
        elif host_side is not None and host_side.master != bridge:
            cmds.append([*hip, "link", "set", tap, "master", bridge, "up"])
    wanted = {v.port_id for v in server.vifs}
    for iface in interfaces:
        if iface.port_id not in wanted:
            cmds.append([*sip, "link", "del", iface.name])
    gateways = next((v.gateways for v in server.vifs if v.gateways), ())
    for gw in gateways:
        if gw not in routes:
            family = "-6" if ipaddress.ip_address(gw).version == 6 else "-4"
            cmds.append([*sip, family, "route", "replace", "default", "via", gw])
    return cmds


def nodad(address: str) -> list[str]:
    """IPv6 addresses come up at once (no duplicate detection wait)."""
    return ["nodad"] if ipaddress.ip_interface(address).version == 6 else []
