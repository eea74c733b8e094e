"""The commands that make router and outside namespaces match what Neutron says
(pure planning, like ``reconcile``: the agent runs them, unit tests read them).

Only namespaces with the agent's own prefixes, links named by ``names`` and
routes the agent adds (``proto static``) are ever changed or removed.
"""

from __future__ import annotations

from isthmus.sandbox.dataplane import names
from isthmus.sandbox.dataplane.kernel import FORWARDING, Command, HostState, RouterState, ServerInterface
from isthmus.sandbox.dataplane.reconcile import nodad
from isthmus.sandbox.dataplane.routers import Outside, Router

# Forwarding on; no reverse-path filter: a reply may come back over the transit
# network while its request left through an interface (halves route asymmetrically).
ROUTER_SYSCTLS = [f"{key}=1" for key in FORWARDING] + ["net.ipv4.conf.all.rp_filter=0",
                                                      "net.ipv4.conf.default.rp_filter=0"]


def _veth(host_ns: str, ns: str, host_end: str, inner: str, mac: str | None, mtu: int, alias: str,
          addresses: tuple[str, ...], bridge: str, leftover: bool) -> list[Command]:
    """A veth from the network's bridge in the host namespace into ``ns``."""
    hip, nip = ["ip", "-n", host_ns], ["ip", "-n", ns]
    cmds: list[Command] = [[*hip, "link", "del", host_end]] if leftover else []
    cmds += [[*hip, "link", "add", "name", host_end, "type", "veth", "peer", "name", inner, "netns", ns],
             [*nip, "link", "set", inner, *(["address", mac] if mac else []), "mtu", str(mtu), "alias", alias, "up"],
             *[[*nip, "addr", "add", a, "dev", inner, *nodad(a)] for a in addresses],
             [*hip, "link", "set", host_end, "master", bridge, "mtu", str(mtu), "up"]]
    return cmds


def _fix_interface(host_ns: str, ns: str, iface: ServerInterface, host_end: str, mac: str | None, mtu: int,
                   addresses: tuple[str, ...], bridge: str, state: HostState) -> list[Command]:
    """An existing interface back to its MAC, MTU, addresses and bridge."""
    nip = ["ip", "-n", ns]
    cmds: list[Command] = []
    if (mac and iface.mac != mac) or iface.mtu != mtu:
        cmds.append([*nip, "link", "set", iface.name, *(["address", mac] if mac else []), "mtu", str(mtu), "up"])
    for addr in sorted(set(iface.addresses) - set(addresses)):
        cmds.append([*nip, "addr", "del", addr, "dev", iface.name])
    for addr in [a for a in addresses if a not in iface.addresses]:
        cmds.append([*nip, "addr", "add", addr, "dev", iface.name, *nodad(addr)])
    host_side = state.links.get(host_end)
    if host_side is not None and host_side.master != bridge:
        cmds.append(["ip", "-n", host_ns, "link", "set", host_end, "master", bridge, "up"])
    return cmds


def router_link_commands(host_ns: str, router_ns: str, router: Router, present: RouterState | None,
                         state: HostState) -> list[Command]:
    """The router's namespace (forwarding on) with one interface per router port,
    carrying the port's MAC and addresses, its host end on the network's bridge."""
    nip = ["ip", "-n", router_ns]
    cmds: list[Command] = []
    if present is None:
        cmds += [["ip", "netns", "add", router_ns], [*nip, "link", "set", "lo", "up"]]
    if present is None or not present.forwarding:
        cmds.append(["ip", "netns", "exec", router_ns, "sysctl", "-qw", *ROUTER_SYSCTLS])
    interfaces = {i.name: i for i in (present.interfaces if present else ())}
    for port in router.ports:
        tap, bridge = names.tap(port.port_id), names.bridge(port.network_id)
        iface = interfaces.get(port.ifname)
        if iface is None or iface.port_id != port.port_id:
            if iface is not None:
                cmds.append([*nip, "link", "del", iface.name])
            cmds += _veth(host_ns, router_ns, tap, port.ifname, port.mac, port.mtu, port.port_id, port.addresses,
                          bridge, leftover=tap in state.links)
        else:
            cmds += _fix_interface(host_ns, router_ns, iface, tap, port.mac, port.mtu, port.addresses, bridge, state)
    wanted = {p.ifname for p in router.ports}
    for name in sorted(set(interfaces) - wanted):
        cmds.append([*nip, "link", "del", name])
    return cmds


def router_route_commands(router_ns: str, router: Router, present: frozenset[tuple[str, str]]) -> list[Command]:
    """Extra routes and the gateway's default route; the connected routes come
    with the addresses. Each command stands alone (a route whose next hop is
    not on-link yet fails alone and is retried next pass)."""
    nip = ["ip", "-n", router_ns]
    wanted = set(router.routes)
    cmds: list[Command] = []
    for destination, nexthop in sorted(present - wanted):
        if destination not in dict(router.routes):  # a changed next hop is replaced below
            cmds.append([*nip, _family(destination), "route", "del", destination, "via", nexthop, "proto", "static"])
    for destination, nexthop in sorted(wanted - present):
        cmds.append([*nip, _family(destination), "route", "replace", destination, "via", nexthop, "proto", "static"])
    return cmds


def outside_commands(host_ns: str, outside_ns: str, outside: Outside, interfaces: list[ServerInterface] | None,
                     state: HostState) -> list[Command]:
    """The external network's upstream router: one interface on its bridge with
    the external subnets' gateway addresses."""
    link, inner = names.outside_link(outside.network_id), names.OUTSIDE_INTERFACE
    bridge = names.bridge(outside.network_id)
    cmds: list[Command] = []
    if interfaces is None:
        cmds += [["ip", "netns", "add", outside_ns], ["ip", "-n", outside_ns, "link", "set", "lo", "up"]]
        interfaces = []
    iface = next((i for i in interfaces if i.name == inner), None)
    if iface is None:
        return cmds + _veth(host_ns, outside_ns, link, inner, None, outside.mtu, outside.network_id,
                            outside.addresses, bridge, leftover=link in state.links)
    return cmds + _fix_interface(host_ns, outside_ns, iface, link, None, outside.mtu, outside.addresses, bridge, state)


def namespace_removals(wanted: set[str], existing: set[str]) -> list[Command]:
    """Router or outside namespaces nothing wants (their veths go with them)."""
    return [["ip", "netns", "delete", ns] for ns in sorted(existing - wanted)]


def _family(destination: str) -> str:
    return "-6" if ":" in destination else "-4"
