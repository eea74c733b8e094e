"""Pure planning of cross-region routers: which regions get a half of a central
router, and what each half holds (interfaces, routes, gateway, floating IPs).
No I/O, so unit-tested directly; ``router_sync`` reads and applies.

The design (docs/networking.md, "Routers"):

* A central router R gets one **half** in every region where a network
  attached to R has a copy (where its ports live), and in the region of R's
  external network. A half is a plain regional router (its own id, recorded in
  a ``router`` routing).
* A half has an interface on every attached subnet present in its region, at
  that region's gateway address of the subnet (the address the regional copy
  of the subnet already names as its gateway), so servers route through the
  half next to them.
* Halves reach each other over a **transit network** of R's own (central,
  VxLAN, port security off), one port per half, when R has two halves or more.
* A half routes every attached subnet it lacks to the transit address of the
  first region (by name) that has it: one route per *subnet*, not per server,
  so a boot changes no route. L2 stretching carries the rest.
* With an external gateway, the half in the external network's region holds
  it (same address, same SNAT setting); every other half routes the default
  route of each family the external network has to that half.
* The user's extra routes of R reach every half: as they are where the next
  hop is on-link, else towards a half where it is.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from isthmus.network import PROFILE_KEY, port_report

DEFAULT_ROUTE = {4: "0.0.0.0/0", 6: "::/0"}
# The description of every regional object router_sync makes: how it finds them
# again after a crash before the routing was written (never by name alone).
HALF_TAG = "isthmus:half-of:"
FIP_TAG = "isthmus:floatingip:"


def half_description(router_id: str) -> str:
    return f"{HALF_TAG}{router_id}"


def fip_description(fip_id: str) -> str:
    return f"{FIP_TAG}{fip_id}"


def tagged_fip(fip: Mapping[str, Any]) -> str | None:
    """The central floating IP a regional one was made for (None: not ours)."""
    text = fip.get("description") or ""
    return text[len(FIP_TAG):] if text.startswith(FIP_TAG) else None


@dataclass(frozen=True)
class Attached:
    """A subnet on the central router, and where its network has copies."""

    subnet_id: str
    network_id: str
    cidr: str
    regions: frozenset[str]

    @property
    def ip_version(self) -> int:
        return ipaddress.ip_network(self.cidr, strict=False).version


@dataclass(frozen=True)
class Gateway:
    network_id: str
    region: str
    enable_snat: bool
    fixed_ips: tuple[tuple[str, str], ...]  # (subnet id, address) at central
    cidrs: tuple[str, ...]  # the external network's subnets

    @property
    def ip_versions(self) -> set[int]:
        return {ipaddress.ip_network(c, strict=False).version for c in self.cidrs}


@dataclass(frozen=True)
class Route:
    destination: str
    nexthop: str

    def body(self) -> dict[str, str]:
        return {"destination": self.destination, "nexthop": self.nexthop}


@dataclass(frozen=True)
class RouterView:
    """What central says of one router."""

    router_id: str
    project_id: str
    name: str
    admin_state_up: bool
    attached: tuple[Attached, ...]
    gateway: Gateway | None = None
    routes: tuple[Route, ...] = ()
    regions: frozenset[str] | None = None  # its AZ hints' regions; None: no hints, any region


def halves(view: RouterView) -> list[str]:
    """The regions that get a half, sorted: never outside the router's hints."""
    regions = set().union(*(a.regions for a in view.attached)) if view.attached else set()
    if view.gateway is not None:
        regions.add(view.gateway.region)
    if view.regions is not None:
        regions &= view.regions
    return sorted(regions)


def needs_transit(view: RouterView) -> bool:
    return len(halves(view)) > 1


TransitAddresses = Mapping[str, Mapping[int, str]]  # region -> ip version -> its half's transit address


@dataclass(frozen=True)
class HalfSpec:
    """What one half must be."""

    region: str
    subnets: frozenset[str]  # attached subnets it has an interface on
    routes: frozenset[Route]
    gateway: Gateway | None  # only in the external network's region


def desired_half(view: RouterView, region: str, transit: TransitAddresses) -> HalfSpec:
    """The half of ``view`` in ``region``. Routes that need a transit address
    not known yet (the other half not made yet) are left out: the next pass
    adds them."""
    local = [a for a in view.attached if region in a.regions]
    routes: set[Route] = set()

    def via(owner: str | None, version: int, destination: str) -> None:
        address = (transit.get(owner) or {}).get(version) if owner and owner != region else None
        if address:
            routes.add(Route(destination, address))

    for subnet in view.attached:
        if subnet.regions and region not in subnet.regions:
            via(min(subnet.regions), subnet.ip_version, subnet.cidr)
    gateway = view.gateway if view.gateway is not None and view.gateway.region == region else None
    if view.gateway is not None and gateway is None:
        for version in sorted(view.gateway.ip_versions):
            via(view.gateway.region, version, DEFAULT_ROUTE[version])
    on_link = [a.cidr for a in local] + (list(gateway.cidrs) if gateway else [])
    for route in view.routes:
        if _within(route.nexthop, on_link):
            routes.add(route)
            continue
        owner = _owner_of(view, route.nexthop)
        if owner is not None:
            via(owner, ipaddress.ip_address(route.nexthop).version, route.destination)
    return HalfSpec(region, frozenset(a.subnet_id for a in local), frozenset(routes), gateway)


def _within(address: str, cidrs: Iterable[str]) -> bool:
    ip = ipaddress.ip_address(address)
    return any(ip in ipaddress.ip_network(c, strict=False) for c in cidrs)


def _owner_of(view: RouterView, address: str) -> str | None:
    """The region whose half has ``address`` on-link (None: no half has)."""
    for subnet in view.attached:
        if subnet.regions and _within(address, [subnet.cidr]):
            return min(subnet.regions)
    if view.gateway is not None and _within(address, view.gateway.cidrs):
        return view.gateway.region
    return None


@dataclass(frozen=True)
class HalfState:
    """What a half has now (read from its region)."""

    subnets: frozenset[str]  # attached subnets it has an interface on (transit excluded)
    routes: frozenset[Route]
    gateway_network: str | None
    gateway_ips: frozenset[tuple[str, str]] = frozenset()
    enable_snat: bool | None = None


@dataclass
class HalfPlan:
    add_subnets: list[str] = field(default_factory=list)
    remove_subnets: list[str] = field(default_factory=list)
    routes: list[Route] | None = None  # None: unchanged
    set_gateway: Gateway | None = None
    clear_gateway: bool = False

    @property
    def empty(self) -> bool:
        return not (self.add_subnets or self.remove_subnets or self.routes is not None
                    or self.set_gateway or self.clear_gateway)


def plan_half(spec: HalfSpec, state: HalfState) -> HalfPlan:
    """The changes that make ``state`` into ``spec``. The caller applies them
    in the order interfaces added, gateway, routes, interfaces removed: a route
    needs its next hop on-link, and Neutron refuses to remove an interface a
    route still uses."""
    plan = HalfPlan(add_subnets=sorted(spec.subnets - state.subnets),
                    remove_subnets=sorted(state.subnets - spec.subnets))
    if spec.routes != state.routes:
        plan.routes = sorted(spec.routes, key=lambda r: (r.destination, r.nexthop))
    gw = spec.gateway
    if gw is None:
        plan.clear_gateway = state.gateway_network is not None
    elif (state.gateway_network != gw.network_id or state.gateway_ips != frozenset(gw.fixed_ips)
          or state.enable_snat != gw.enable_snat):
        plan.set_gateway = gw
    return plan


def gateway_body(gateway: Gateway, regional_network_id: str | None = None) -> dict[str, Any]:
    """``external_gateway_info`` of the half in the external network's region:
    central's addresses, so SNAT and floating IPs use what central allocated."""
    return {"network_id": regional_network_id or gateway.network_id, "enable_snat": gateway.enable_snat,
            "external_fixed_ips": [{"subnet_id": s, "ip_address": a} for s, a in gateway.fixed_ips]}


# ------------------------------------------------------------------ floating IPs
@dataclass(frozen=True)
class FloatingIp:
    """A central floating IP of the router, associated with a port."""

    fip_id: str
    project_id: str
    address: str
    network_id: str  # the external network
    port_id: str
    fixed_ip: str
    status: str = "DOWN"  # central's, which router_sync keeps true


@dataclass
class FipPlan:
    create: list[FloatingIp] = field(default_factory=list)
    move: list[tuple[str, FloatingIp]] = field(default_factory=list)  # (regional id, what it must be)
    delete: list[str] = field(default_factory=list)  # regional ids


def plan_fips(central: Iterable[FloatingIp], regional: Iterable[Mapping[str, Any]]) -> FipPlan:
    """Floating IPs in the external network's region against central's.

    ``regional``: the region's floating IPs Isthmus made (tagged) or holding a
    central address. One per central floating IP, same address, same port; a
    tagged one whose central floating IP left the router goes. A regional
    floating IP of the same address that Isthmus did not make is adopted."""
    plan = FipPlan()
    want: dict[str | None, FloatingIp] = {f.address: f for f in central}
    seen: set[str | None] = set()
    for fip in regional:
        address = fip.get("floating_ip_address")
        target = want.get(address)
        if target is None or address in seen:
            if tagged_fip(fip):
                plan.delete.append(fip["id"])
            continue
        seen.add(address)
        if (fip.get("port_id") != target.port_id or fip.get("fixed_ip_address") != target.fixed_ip
                or tagged_fip(fip) != target.fip_id):
            plan.move.append((fip["id"], target))
    plan.create = [f for a, f in sorted(want.items()) if a not in seen]
    return plan


# ------------------------------------------------------------- status at central
# Central runs no L3 agent: its router ports and floating IPs would stay DOWN
# forever (Tricircle's). Their status follows what the regions show instead.
ACTIVE, DOWN = "ACTIVE", "DOWN"


def router_port_binding(central_port: Mapping[str, Any],
                        counterparts: Mapping[str, Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """The binding to write on one of central's router ports (an interface or
    the gateway) so its status tells the truth, None when it already does.

    ``counterparts``: each region that must carry the port -> its half's port
    there (None: not there yet). Once every one is ACTIVE, central's port is
    bound as the first region's (central's driver then binds it ACTIVE);
    otherwise it is unbound (DOWN)."""
    ready = bool(counterparts) and all(p is not None and p.get("status") == ACTIVE for p in counterparts.values())
    if ready:
        region = min(counterparts)
        report = port_report(region, counterparts[region] or {}, None)
        want = {k: report[k] for k in ("binding:host_id", "binding:profile")}
    else:
        want = {"binding:host_id": "", "binding:profile": {}}
    if all((central_port.get(k) or type(v)()) == v for k, v in want.items()):
        return None
    return want


def floatingip_status(fip: FloatingIp, regional: Iterable[Mapping[str, Any]]) -> str:
    """The status central's floating IP must show: that of its counterpart in
    the external network's region once it points at the same port, else DOWN."""
    for other in regional:
        if other.get("floating_ip_address") == fip.address and other.get("port_id") == fip.port_id:
            return other.get("status") or DOWN
    return DOWN


def floatingip_report(region: str, status: str) -> dict[str, Any]:
    """What router_sync writes on central's floating IP port: central's driver
    sets the floating IP's status from it (an API user cannot set a status)."""
    return {"binding:profile": {PROFILE_KEY: {"region": region, "floatingip_status": status}}}
