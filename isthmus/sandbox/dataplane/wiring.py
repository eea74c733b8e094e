"""What one compute host's dataplane should look like, computed from Neutron's
answers alone (pure: no kernel, no HTTP, so every rule here is unit-tested).

The rules follow what ML2's l2population gives an agent: for every network with a
port on this host, the segment's VNI; for every port of that network bound to
another host, its MAC and IPs towards the tunnel IP that host's agent reports;
flooding to every such tunnel IP.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from isthmus.network import SHADOW_OWNER

if TYPE_CHECKING:
    from isthmus.sandbox.dataplane.routers import Outside, Router

UNBOUND_VIF_TYPES = ("", "unbound", "binding_failed")
DEFAULT_MTU = 1450  # VXLAN over a 1500-byte underlay, Neutron's own figure
FLAT_MTU = 1500


@dataclass(frozen=True)
class Vif:
    """One interface of a server: a port bound to this host."""

    port_id: str
    network_id: str
    mac: str
    addresses: tuple[str, ...]  # "10.0.0.5/24", in the port's fixed_ips order
    gateways: tuple[str, ...]  # the subnets' gateway IPs, at most one per IP version
    mtu: int


@dataclass(frozen=True)
class Server:
    server_id: str
    vifs: tuple[Vif, ...]  # by port id: a stable order


@dataclass(frozen=True)
class RemotePort:
    """A port of one of our networks bound elsewhere (in another region: its shadow)."""

    mac: str
    ips: tuple[str, ...]
    vtep: str


@dataclass(frozen=True)
class NetworkWiring:
    network_id: str
    vni: int | None  # None: not a VXLAN network (only local traffic is bridged)
    mtu: int
    remote_ports: frozenset[RemotePort] = frozenset()

    @property
    def flood_vteps(self) -> frozenset[str]:
        """The tunnel IPs holding a port of the network (l2pop's flooding list)."""
        return frozenset(p.vtep for p in self.remote_ports)


@dataclass(frozen=True)
class HostWiring:
    servers: Mapping[str, Server] = field(default_factory=dict)
    networks: Mapping[str, NetworkWiring] = field(default_factory=dict)
    routers: Mapping[str, Router] = field(default_factory=dict)
    outsides: Mapping[str, Outside] = field(default_factory=dict)  # by external network id


def is_bound(port: dict) -> bool:
    return bool(port.get("binding:host_id")) and port.get("binding:vif_type", "") not in UNBOUND_VIF_TYPES


def is_server_port(port: dict) -> bool:
    """A port Nova plugged into a server (not a shadow of a remote one, not DHCP)."""
    owner = port.get("device_owner") or ""
    return owner.startswith("compute:") and owner != SHADOW_OWNER and bool(port.get("device_id"))


def local_server_ports(host: str, ports: Iterable[dict]) -> list[dict]:
    return [p for p in ports if is_server_port(p) and is_bound(p) and p["binding:host_id"] == host]


def tunnel_ips(agents: Iterable[dict]) -> dict[str, str]:
    """host -> tunnel IP, from the OVS agent rows (real, the sandbox binder's, or
    Isthmus' shadow agents): what l2population reads."""
    found: dict[str, str] = {}
    for agent in agents:
        ip = (agent.get("configurations") or {}).get("tunneling_ip")
        if agent.get("host") and ip:
            found[agent["host"]] = ip
    return found


def plan_host(host: str, local_ip: str, ports: Iterable[dict], networks: Iterable[dict],
              subnets: Iterable[dict], agents: Iterable[dict], extra_networks: Iterable[str] = ()) -> HostWiring:
    """``ports``: this host's server ports plus every port of their networks;
    ``extra_networks``: networks wired here without a server port (a router's
    or an external network's), whose ports ``ports`` holds too;
    ``networks``/``subnets``: those networks and their subnets; ``agents``: the
    region's OVS agent rows."""
    ports = list(ports)
    nets = {n["id"]: n for n in networks}
    prefixes = {s["id"]: ipaddress.ip_network(s["cidr"]).prefixlen for s in subnets}
    gateways = {s["id"]: s.get("gateway_ip") for s in subnets}
    vteps = tunnel_ips(agents)

    mine = [p for p in local_server_ports(host, ports) if p["network_id"] in nets]
    servers: dict[str, list[Vif]] = {}
    for port in mine:
        net = nets[port["network_id"]]
        known = [ip for ip in port.get("fixed_ips", []) if ip["subnet_id"] in prefixes]
        servers.setdefault(port["device_id"], []).append(Vif(
            port_id=port["id"], network_id=port["network_id"], mac=port["mac_address"].lower(),
            addresses=tuple(f"{ip['ip_address']}/{prefixes[ip['subnet_id']]}" for ip in known),
            gateways=_one_gateway_per_version(gateways.get(ip["subnet_id"]) for ip in known),
            mtu=network_mtu(net)))

    wired: dict[str, NetworkWiring] = {}
    for net_id in sorted({p["network_id"] for p in mine} | (set(extra_networks) & set(nets))):
        net = nets[net_id]
        vni = net.get("provider:segmentation_id") if net.get("provider:network_type") == "vxlan" else None
        remote = frozenset(
            RemotePort(mac=p["mac_address"].lower(), ips=tuple(ip["ip_address"] for ip in p.get("fixed_ips", [])),
                       vtep=vteps[p["binding:host_id"]])
            for p in ports
            if p["network_id"] == net_id and is_bound(p) and p["binding:host_id"] != host
            and vteps.get(p["binding:host_id"]) not in (None, local_ip)
        ) if vni is not None else frozenset()
        wired[net_id] = NetworkWiring(net_id, int(vni) if vni is not None else None, network_mtu(net), remote)
    return HostWiring(
        servers={sid: Server(sid, tuple(sorted(vifs, key=lambda v: v.port_id))) for sid, vifs in servers.items()},
        networks=wired)


def _one_gateway_per_version(candidates: Iterable[str | None]) -> tuple[str, ...]:
    chosen: dict[int, str] = {}
    for gw in candidates:
        if gw:
            chosen.setdefault(ipaddress.ip_address(gw).version, gw)
    return tuple(chosen.values())


def network_mtu(network: dict) -> int:
    if network.get("mtu"):
        return int(network["mtu"])
    return FLAT_MTU if network.get("provider:network_type") == "flat" else DEFAULT_MTU
