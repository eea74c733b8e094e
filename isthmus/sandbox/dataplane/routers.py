"""What the region's routers and external networks should look like on its host,
computed from Neutron's answers alone (pure, unit-tested): the dataplane agent
is the region's L3 agent (the sandbox runs none).

A router is a namespace with forwarding on and one interface per router port
(its MAC and fixed IPs), its extra routes, a default route to the external
subnet's gateway when it has a gateway, and NAT: SNAT of what leaves the gateway
interface, 1:1 NAT for floating IPs. An external network gets an "outside"
namespace holding the external subnets' gateway addresses: the upstream router.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from isthmus.sandbox.dataplane import names
from isthmus.sandbox.dataplane.wiring import network_mtu

INTERFACE_OWNER = "network:router_interface"
GATEWAY_OWNER = "network:router_gateway"
ROUTER_OWNERS = (INTERFACE_OWNER, GATEWAY_OWNER)
FLOATINGIP_OWNER = "network:floatingip"
DEFAULT_ROUTE = {4: "0.0.0.0/0", 6: "::/0"}


@dataclass(frozen=True)
class RouterPort:
    port_id: str
    network_id: str
    mac: str
    addresses: tuple[str, ...]  # "10.0.0.1/24"; on the gateway port also the floating IPs as /32
    mtu: int
    gateway: bool  # the router's external gateway port (qg-), else an interface (qr-)

    @property
    def ifname(self) -> str:
        return names.router_interface(self.port_id, self.gateway)


@dataclass(frozen=True, order=True)  # a router's NATs are kept sorted
class Nat:
    floating_ip: str
    fixed_ip: str


@dataclass(frozen=True)
class Router:
    router_id: str
    ports: tuple[RouterPort, ...]  # by port id
    routes: tuple[tuple[str, str], ...]  # (destination, nexthop), sorted; the gateway's default included
    snat_address: str | None = None  # the gateway's IPv4 address when enable_snat
    floating: tuple[Nat, ...] = ()

    @property
    def gateway_port(self) -> RouterPort | None:
        return next((p for p in self.ports if p.gateway), None)


@dataclass(frozen=True)
class Outside:
    """The upstream router of an external network: its subnets' gateway addresses."""

    network_id: str
    addresses: tuple[str, ...]
    mtu: int


def router_ports(routers: Iterable[dict], ports: Iterable[dict]) -> list[dict]:
    """The interface and gateway ports of these routers."""
    ids = {r["id"] for r in routers}
    return [p for p in ports if p.get("device_owner") in ROUTER_OWNERS and p.get("device_id") in ids]


def ports_to_bind(ports: Iterable[dict]) -> list[str]:
    """Router ports nobody has bound yet: the L3 agent binds them to its host
    (then ML2 wires them, and a transit port gets reported to central)."""
    return sorted(p["id"] for p in ports if p.get("device_owner") in ROUTER_OWNERS and not p.get("binding:host_id"))


@dataclass(frozen=True)
class FloatingIpBinding:
    """A floating IP's own port, to bind to this host once its router carries
    it (the sandbox binder then shows the floating IP ACTIVE) or to unbind."""

    port_id: str
    router_id: str | None  # None: to unbind
    bind: bool


def floatingip_bindings(floatingips: Iterable[dict], fip_ports: Iterable[dict], host: str) -> list[FloatingIpBinding]:
    """The floating IP ports whose binding differs from what their floating IP
    says: bound here when associated with a port, unbound when not."""
    by_id = {f["id"]: f for f in floatingips}
    out = []
    for port in sorted(fip_ports, key=lambda p: p["id"]):
        fip = by_id.get(port.get("device_id") or "")
        associated = fip is not None and bool(fip.get("port_id")) and bool(fip.get("router_id"))
        bound = port.get("binding:host_id") or ""
        if associated and bound != host:
            assert fip is not None  # associated
            out.append(FloatingIpBinding(port["id"], fip["router_id"], True))
        elif not associated and bound:
            out.append(FloatingIpBinding(port["id"], None, False))
    return out


def external_networks(networks: Iterable[dict], subnets: Iterable[dict]) -> list[str]:
    """External networks with at least one subnet (the ones an outside namespace serves)."""
    with_subnet = {s["network_id"] for s in subnets}
    return sorted(n["id"] for n in networks if n.get("router:external") and n["id"] in with_subnet)


def plan_routers(routers: Iterable[dict], ports: Iterable[dict], floatingips: Iterable[dict],
                 networks: Iterable[dict], subnets: Iterable[dict]) -> dict[str, Router]:
    """``ports``: the routers' ports; ``networks``/``subnets``: theirs (others ignored)."""
    subnet_by_id = {s["id"]: s for s in subnets}
    mtus = {n["id"]: network_mtu(n) for n in networks}
    fips = list(floatingips)
    planned: dict[str, Router] = {}
    for router in routers:
        mine = sorted((p for p in ports if p.get("device_id") == router["id"]), key=lambda p: p["id"])
        nats = tuple(sorted(Nat(f["floating_ip_address"], f["fixed_ip_address"]) for f in fips
                            if f.get("router_id") == router["id"] and f.get("port_id") and f.get("fixed_ip_address")
                            and f.get("floating_ip_address")))
        rports = tuple(_router_port(p, subnet_by_id, mtus, nats) for p in mine if p["network_id"] in mtus)
        gateway = next((p for p in mine if p.get("device_owner") == GATEWAY_OWNER), None)
        info = router.get("external_gateway_info") or {}
        routes: dict[str, str] = {}
        snat = None
        if gateway is not None and info:
            for ip in _known_ips(gateway, subnet_by_id):
                gw = subnet_by_id[ip["subnet_id"]].get("gateway_ip")
                version = ipaddress.ip_address(ip["ip_address"]).version
                if gw:
                    routes.setdefault(DEFAULT_ROUTE[version], gw)
                if version == 4 and info.get("enable_snat", True) and snat is None:
                    snat = ip["ip_address"]
        for route in router.get("routes") or []:  # the user's (here: router_sync's) routes win
            routes[_network(route["destination"])] = route["nexthop"]
        planned[router["id"]] = Router(router["id"], rports, tuple(sorted(routes.items())), snat,
                                       nats if gateway is not None else ())
    return planned


def plan_outsides(network_ids: Iterable[str], networks: Iterable[dict], subnets: Iterable[dict]) -> dict[str, Outside]:
    nets = {n["id"]: n for n in networks}
    subnets = list(subnets)
    outsides = {}
    for net_id in network_ids:
        addresses = tuple(f"{s['gateway_ip']}/{ipaddress.ip_network(s['cidr']).prefixlen}"
                          for s in sorted(subnets, key=lambda s: s["id"])
                          if s["network_id"] == net_id and s.get("gateway_ip"))
        if addresses and net_id in nets:
            outsides[net_id] = Outside(net_id, addresses, network_mtu(nets[net_id]))
    return outsides


def _router_port(port: dict, subnets: Mapping[str, dict], mtus: Mapping[str, int], nats: tuple[Nat, ...]) -> RouterPort:
    gateway = port.get("device_owner") == GATEWAY_OWNER
    addresses = [f"{ip['ip_address']}/{ipaddress.ip_network(subnets[ip['subnet_id']]['cidr']).prefixlen}"
                 for ip in _known_ips(port, subnets)]
    if gateway:  # the floating IPs answer ARP on the external network through the gateway interface
        addresses += [f"{n.floating_ip}/{32 if ipaddress.ip_address(n.floating_ip).version == 4 else 128}"
                      for n in nats]
    return RouterPort(port["id"], port["network_id"], port["mac_address"].lower(), tuple(addresses),
                      mtus[port["network_id"]], gateway)


def _known_ips(port: dict, subnets: Mapping[str, dict]) -> list[dict]:
    return [ip for ip in port.get("fixed_ips") or [] if ip["subnet_id"] in subnets]


def _network(destination: str) -> str:
    return ipaddress.ip_network(destination, strict=False).with_prefixlen


def nat_ruleset(router: Router) -> str | None:
    """The router's nftables table, in the form ``nft list table`` prints it
    (so what the kernel holds compares as text); None: the router needs no NAT.

    Floating IPs: DNAT floating -> fixed on the way in, SNAT fixed -> floating
    on the way out of the gateway; everything else leaving the gateway is
    SNATed to the gateway's address when enable_snat is set."""
    gateway = router.gateway_port
    if gateway is None or not (router.floating or router.snat_address):
        return None
    v4 = [n for n in router.floating if ipaddress.ip_address(n.floating_ip).version == 4]
    dnat = [f"ip daddr {n.floating_ip} dnat to {n.fixed_ip}" for n in v4]
    snat = [f'oifname "{gateway.ifname}" ip saddr {n.fixed_ip} snat to {n.floating_ip}' for n in v4]
    if router.snat_address:
        snat.append(f'oifname "{gateway.ifname}" snat to {router.snat_address}')
    return "\n".join([
        f"table ip {names.NAT_TABLE} {{",
        "\tchain prerouting {",
        "\t\ttype nat hook prerouting priority dstnat; policy accept;",
        *[f"\t\t{rule}" for rule in dnat],
        "\t}",
        "",
        "\tchain postrouting {",
        "\t\ttype nat hook postrouting priority srcnat; policy accept;",
        *[f"\t\t{rule}" for rule in snat],
        "\t}",
        "}"])
