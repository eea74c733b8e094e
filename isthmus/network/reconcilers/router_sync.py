"""``router_sync``: a central router, carried out in every region it reaches.

Level-triggered, keyed by the central router's id. Central's driver queues it
when the router, its interfaces, its gateway or one of its floating IPs
change, and when a network attached to it is first used in a region; the
periodic resync is the backstop. Each pass reads central (the router, its
interface ports, their subnets, its floating IPs), plans every half with
:mod:`l3_plans` and applies what differs, region by region in parallel: an
unreachable region is retried later, never read as "gone", and holds up no
other region.

What Isthmus adds is recorded in routings (the Admin API lists them, deletes
find them): ``router`` (a region's half), ``transit_network`` (the router's
transit network, central pod) and ``transit_port`` (a half's transit port at
central). A half is removed when central no longer places the router in its
region; everything goes when central recorded the router's delete.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from isthmus.clients import NeutronClient, Rejected, Unavailable
from isthmus.jobs import JobContext, PermanentFailure, RetryLater
from isthmus.network import TRANSIT_OWNER, TRANSIT_PORT_PREFIX, TRANSIT_TAG, bound_region, port_report
from isthmus.network.reconcilers import l3_plans, plans
from isthmus.network.reconcilers.binding_sync import host_agent
from isthmus.network.reconcilers.fanout import in_every_region
from isthmus.network.reconcilers.ovn import wiring as ovn_wiring
from isthmus.network.reconcilers.ovn.access import OvnAccess
from isthmus.network.reconcilers.regions import Regions
from isthmus.network.reconcilers.topology import Topology
from isthmus.registry import Registry, Tombstones

LOG = logging.getLogger(__name__)
INTERFACE_OWNER = "network:router_interface"
GATEWAY_OWNER = "network:router_gateway"
FLOATINGIP_OWNER = "network:floatingip"
STATUS_WAIT_ATTEMPTS = 10
STATUS_WAIT_DELAY = 2.0


@dataclass(frozen=True)
class RouterSync:
    """The ``router_sync`` handler (keyed by central router)."""

    regions: Regions
    registry: Registry  # routings of halves, transit network and transit ports
    topology: Topology
    tombstones: Tombstones
    ovn: OvnAccess  # transit ports wired as remote ports on ML2/OVN regions
    transit_cidrs: Mapping[int, str]  # [isthmus] transit_cidr, transit_cidr_v6: IP version -> range

    def run(self, ctx: JobContext) -> None:
        router_id = ctx.resource_id
        central, registry = self.regions.central, self.registry
        try:
            router = central.get("routers", router_id)
            if router is not None:
                view, fips, central_ports = _read_central(central, registry, self.topology, router)
        except Unavailable as err:
            raise RetryLater(f"central: {err}") from err
        regions = self.topology.regions()
        if router is None:
            if not self.tombstones.is_buried("router", router_id):
                raise PermanentFailure(f"central has no router {router_id} but recorded no delete of it; "
                                       "its regional halves are kept")
            in_every_region(regions, lambda region: self._remove_half(router_id, region), f"router {router_id}")
            _remove_transit(central, registry, router_id)
            return
        wanted = l3_plans.halves(view)
        transit: dict[str, dict[int, str]] = {}
        transit_ports: dict[str, dict] = {}
        transit_network = _transit_network_id(registry, router_id)
        if len(wanted) > 1:
            try:
                transit_network = _ensure_transit_network(central, registry, view, self.transit_cidrs)
                for region in wanted:
                    port = _ensure_transit_port(central, registry, view, transit_network, region)
                    transit_ports[region] = port
                    transit[region] = {_version(ip["ip_address"]): ip["ip_address"] for ip in port["fixed_ips"]}
            except Unavailable as err:
                raise RetryLater(f"central: {err}") from err
        # What each reachable region shows once converged: its half's ports and
        # (external network's region) floating IPs; central's statuses follow them.
        half_ports: dict[str, list[dict]] = {}
        regional_fips: list[dict] = []

        def sync_region(region: str) -> None:
            if region not in wanted:
                self._remove_half(router_id, region)
                return
            spec = l3_plans.desired_half(view, region, transit)
            neutron = self.regions.neutron(region)
            half = _ensure_half(neutron, registry, view, region)
            if region in transit_ports:
                _attach_transit(central, neutron, region, half, transit_ports[region])
            _converge_half(neutron, region, half, spec, transit_network)
            if region not in transit_ports and transit_network:
                _detach_transit(neutron, half, transit_network)  # the other halves are gone
            if view.gateway is not None and view.gateway.region == region:
                regional_fips.extend(_converge_fips(central, neutron, region, view, fips))
            half_ports[region] = neutron.list("ports", device_id=half)

        try:
            in_every_region(regions, sync_region, f"router {router_id}")
            if transit_ports and transit_network:
                _wire_transit_on_ovn(self.ovn, transit_network, list(transit_ports.values()))
        finally:
            waiting = _report_status(central, view, fips, central_ports, half_ports, regional_fips)
        if len(wanted) <= 1:
            _remove_transit(central, registry, router_id)
        if waiting and ctx.attempt < STATUS_WAIT_ATTEMPTS:
            # The regions' L3 agents take a moment to wire what was just made; the
            # periodic resync catches a slower one.
            raise RetryLater(f"waiting for {', '.join(waiting)} to become ACTIVE", delay=STATUS_WAIT_DELAY)

    def _remove_half(self, router_id: str, region: str) -> None:
        """Take the router's half out of ``region``: floating IPs Isthmus made,
        routes, gateway, interfaces, the router; then its routings."""
        pod = self.registry.find_pod(region)
        if pod is None:
            return
        routing = self.registry.find_routing(router_id, pod.pod_id, "router")
        if routing is None:
            return
        central, neutron = self.regions.central, self.regions.neutron(region)
        half = neutron.get("routers", routing.bottom_id) if routing.bottom_id else None
        if half is not None:
            LOG.info("router %s: removing its half %s from %s", router_id, half["id"], region)
            for fip in neutron.list("floatingips", router_id=half["id"]):
                if l3_plans.tagged_fip(fip):
                    neutron.delete("floatingips", fip["id"])
            _remove_idle_fips(central, neutron, half["project_id"])
            if half.get("routes"):
                neutron.update("routers", half["id"], {"routes": []})
            if half.get("external_gateway_info"):
                neutron.update("routers", half["id"], {"external_gateway_info": {}})
            for port in neutron.list("ports", device_id=half["id"], device_owner=INTERFACE_OWNER):
                _remove_interface(neutron, half["id"], {"port_id": port["id"]})
            neutron.delete("routers", half["id"])
        self.registry.delete_routing(routing.id)
        transit = self.registry.find_routing(router_id, pod.pod_id, "transit_port")
        if transit is not None:
            if transit.bottom_id:
                central.delete("ports", transit.bottom_id)
            self.registry.delete_routing(transit.id)


# ----------------------------------------------------------------- central reads
def _read_central(central: NeutronClient, registry: Registry, topology: Topology, router: dict
                  ) -> tuple[l3_plans.RouterView, list[l3_plans.FloatingIp], list[dict]]:
    """The router as central has it, its floating IPs, and its ports (interfaces and gateway)."""
    ports = central.list("ports", device_id=router["id"])
    interfaces = [p for p in ports if p.get("device_owner") == INTERFACE_OWNER]
    subnet_ids = sorted({ip["subnet_id"] for p in interfaces for ip in p.get("fixed_ips") or []})
    subnets = central.list("subnets", id=subnet_ids) if subnet_ids else []
    gateway = _gateway(central, registry, router)
    fips = _floating_ips(central, registry, router, gateway)
    attached = tuple(
        l3_plans.Attached(s["id"], s["network_id"], s["cidr"], frozenset(topology.routed_regions(s["network_id"])))
        for s in sorted(subnets, key=lambda s: s["id"]))
    routes = tuple(l3_plans.Route(r["destination"], r["nexthop"]) for r in router.get("routes") or [])
    hints = router.get("availability_zone_hints") or []
    view = l3_plans.RouterView(router["id"], router["project_id"], router.get("name") or "",
                               bool(router.get("admin_state_up", True)), attached, gateway, routes,
                               frozenset(registry.regions_for_hints(hints)) if hints else None)
    return view, fips, ports


def _gateway(central: NeutronClient, registry: Registry, router: dict) -> l3_plans.Gateway | None:
    info = router.get("external_gateway_info") or None
    if not info or not info.get("network_id"):
        return None
    network = central.get("networks", info["network_id"])
    if network is None:
        raise RetryLater(f"external network {info['network_id']} of router {router['id']} not readable yet")
    hinted = registry.regions_for_hints(network.get("availability_zone_hints") or [])
    if len(hinted) != 1:
        # The external network is physical: it exists in exactly one region,
        # which its hint must name (as Tricircle required).
        raise PermanentFailure(
            f"external network {network['id']} of router {router['id']} must name exactly one region in "
            f"availability_zone_hints (it names {network.get('availability_zone_hints') or 'none'})")
    subnets = central.list("subnets", network_id=network["id"])
    return l3_plans.Gateway(
        network_id=network["id"], region=hinted[0], enable_snat=bool(info.get("enable_snat", True)),
        fixed_ips=tuple(sorted((ip["subnet_id"], ip["ip_address"]) for ip in info.get("external_fixed_ips") or [])),
        cidrs=tuple(sorted(s["cidr"] for s in subnets)))


def _floating_ips(central: NeutronClient, registry: Registry, router: dict,
                  gateway: l3_plans.Gateway | None) -> list[l3_plans.FloatingIp]:
    """The router's floating IPs whose port is bound somewhere. A floating IP
    pulls its port's network into the external network's region (routing), so
    the half there gets an interface on it and a shadow of the port to DNAT to."""
    if gateway is None:
        return []
    out = []
    pod = registry.find_pod(gateway.region)
    for fip in central.list("floatingips", router_id=router["id"]):
        if not fip.get("port_id"):
            continue
        port = central.get("ports", fip["port_id"])
        if port is None or bound_region(port) is None:
            continue  # its server is not up yet: the binding queues this job again
        if pod is not None:
            registry.ensure_routing(port["network_id"], port["network_id"], pod.pod_id, port["project_id"],
                                    "network")
        out.append(l3_plans.FloatingIp(fip["id"], fip["project_id"], fip["floating_ip_address"],
                                       fip["floating_network_id"], port["id"], fip["fixed_ip_address"],
                                       fip.get("status") or l3_plans.DOWN))
    return out


def _version(address: str) -> int:
    return 6 if ":" in address else 4


# ----------------------------------------------------------------------- transit
def _ensure_transit_network(central: NeutronClient, registry: Registry, view: l3_plans.RouterView,
                            cidrs: Mapping[int, str]) -> str:
    """The router's transit network at central (in the service project: not
    the user's to change), with a subnet per IP version of ``cidrs``."""
    pod = registry.central_pod()
    if pod is None:
        raise PermanentFailure("no central pod registered")
    tag = f"{TRANSIT_TAG}{view.router_id}"
    routing = registry.find_routing(view.router_id, pod.pod_id, "transit_network")
    network = central.get("networks", routing.bottom_id) if routing and routing.bottom_id else None
    if network is None:
        found = sorted(central.list("networks", description=tag), key=lambda n: n["id"])
        network = found[0] if found else central.create("networks", {
            "name": f"isthmus-transit-{view.router_id}", "description": tag,
            "port_security_enabled": False, "admin_state_up": True})
        registry.ensure_routing(view.router_id, network["id"], pod.pod_id, view.project_id, "transit_network")
    have = {s["ip_version"] for s in central.list("subnets", network_id=network["id"])}
    for version, cidr in sorted(cidrs.items()):
        if version not in have:
            central.create("subnets", {"network_id": network["id"], "ip_version": version, "cidr": cidr,
                                       "name": f"isthmus-transit-v{version}", "gateway_ip": None,
                                       "enable_dhcp": False, "description": tag})
    return network["id"]


def _ensure_transit_port(central: NeutronClient, registry: Registry, view: l3_plans.RouterView, network_id: str,
                         region: str) -> dict:
    """The transit port of the half in ``region``, allocated at central (one
    address per family, unique among the halves)."""
    pod = registry.find_pod(region)
    name = f"{TRANSIT_PORT_PREFIX}{region}"
    routing = registry.find_routing(view.router_id, pod.pod_id, "transit_port") if pod else None
    port = central.get("ports", routing.bottom_id) if routing and routing.bottom_id else None
    if port is None:
        found = sorted(central.list("ports", network_id=network_id, name=name), key=lambda p: p["id"])
        port = found[0] if found else central.create("ports", {
            "network_id": network_id, "name": name, "device_owner": TRANSIT_OWNER,
            "port_security_enabled": False})
        if pod is not None:
            registry.ensure_routing(view.router_id, port["id"], pod.pod_id, view.project_id, "transit_port")
    return port


def _attach_transit(central: NeutronClient, neutron: NeutronClient, region: str, half: str, port: dict) -> None:
    """Attach the transit port to the half (a GET copies it into the region,
    same UUID, MAC and addresses), and tell central where it is bound once the
    region's L3 agent bound it: central then shadows it in the other halves'
    regions, as it does a server's port."""
    regional = neutron.get("ports", port["id"])
    if regional is None:
        raise RetryLater(f"{region} could not copy transit port {port['id']}")
    if regional.get("device_id") != half:
        LOG.info("router half %s in %s: attaching transit port %s", half, region, port["id"])
        neutron.action("routers", half, "add_router_interface", {"port_id": port["id"]})
        regional = neutron.get("ports", port["id"]) or regional
    report = port_report(region, regional, host_agent(neutron, regional.get("binding:host_id") or ""))
    report["device_owner"] = TRANSIT_OWNER  # central's stays a transit port (regions shadow those)
    if regional.get("binding:host_id") and any(port.get(k) != report[k] for k in report):
        try:
            central.update("ports", port["id"], report, if_revision=port.get("revision_number"))
        except Rejected as err:
            if err.status != 412:
                raise
            raise RetryLater(f"transit port {port['id']} changed at central meanwhile") from err


def _wire_transit_on_ovn(ovn: OvnAccess, network_id: str, ports: list[dict]) -> None:
    """On ML2/OVN regions the halves' transit ports stay unbound (OVN routers are
    distributed: no L3 agent binds them, so no binding reaches central); each OVN
    half's region gets the other halves' transit ports as remote ports at once,
    their region known from the port's name (ovn/wiring.home_of)."""
    keys = ovn.keys
    if keys is None or not ovn.regions:
        return
    hypervisors = ovn.hypervisors()
    in_every_region(sorted(ovn.regions),
                    lambda region: ovn_wiring.sync_network(ovn.regions[region], network_id, ports, keys, hypervisors,
                                                           set()),
                    f"transit {network_id}")


def _transit_network_id(registry: Registry, router_id: str) -> str | None:
    routings = registry.routings_of(router_id, "transit_network")
    return routings[0].bottom_id if routings else None


def _detach_transit(neutron: NeutronClient, half: str, transit_network: str) -> None:
    for port in neutron.list("ports", device_id=half, network_id=transit_network):
        _remove_interface(neutron, half, {"port_id": port["id"]})


def _remove_transit(central: NeutronClient, registry: Registry, router_id: str) -> None:
    """Transit ports and the transit network at central, once fewer than two
    halves remain (the regions detached their sides first). Central's delete
    of the network removes its regional copies (network_sync)."""
    try:
        for routing in registry.routings_of(router_id, "transit_port"):
            if routing.bottom_id:
                central.delete("ports", routing.bottom_id)
            registry.delete_routing(routing.id)
        for routing in registry.routings_of(router_id, "transit_network"):
            if routing.bottom_id:
                for port in central.list("ports", network_id=routing.bottom_id):
                    central.delete("ports", port["id"])
                central.delete("networks", routing.bottom_id)
            registry.delete_routing(routing.id)
    except Unavailable as err:
        raise RetryLater(f"central: {err}") from err


# ------------------------------------------------------------------------ halves
def _ensure_half(neutron: NeutronClient, registry: Registry, view: l3_plans.RouterView, region: str) -> str:
    """The id of the router's half in ``region``, made if missing (found by its
    description after a crash that left no routing)."""
    pod = registry.find_pod(region)
    assert pod is not None
    routing = registry.find_routing(view.router_id, pod.pod_id, "router")
    half = neutron.get("routers", routing.bottom_id) if routing and routing.bottom_id else None
    if half is None:
        tag = l3_plans.half_description(view.router_id)
        found = sorted((r for r in neutron.list("routers", project_id=view.project_id)
                        if r.get("description") == tag), key=lambda r: r["id"])
        if found:
            half = found[0]
        else:
            LOG.info("router %s: making its half in %s", view.router_id, region)
            half = neutron.create("routers", {"name": view.name, "description": tag, "project_id": view.project_id,
                                              "admin_state_up": view.admin_state_up})
        if routing is not None:
            registry.delete_routing(routing.id)
        registry.ensure_routing(view.router_id, half["id"], pod.pod_id, view.project_id, "router")
    changes = {k: v for k, v in (("name", view.name), ("admin_state_up", view.admin_state_up))
               if half.get(k) != v}
    if changes:
        neutron.update("routers", half["id"], changes)
    return half["id"]


def _half_state(neutron: NeutronClient, half_id: str, transit_network: str | None) -> l3_plans.HalfState:
    router = neutron.get("routers", half_id) or {}
    ports = neutron.list("ports", device_id=half_id, device_owner=INTERFACE_OWNER)
    subnets = frozenset(ip["subnet_id"] for p in ports if p["network_id"] != transit_network
                        for ip in p.get("fixed_ips") or [])
    info = router.get("external_gateway_info") or {}
    return l3_plans.HalfState(
        subnets=subnets,
        routes=frozenset(l3_plans.Route(r["destination"], r["nexthop"]) for r in router.get("routes") or []),
        gateway_network=info.get("network_id"),
        gateway_ips=frozenset((ip["subnet_id"], ip["ip_address"]) for ip in info.get("external_fixed_ips") or []),
        enable_snat=info.get("enable_snat") if info else None)


def _converge_half(neutron: NeutronClient, region: str, half: str, spec: l3_plans.HalfSpec,
                   transit: str | None) -> None:
    plan = l3_plans.plan_half(spec, _half_state(neutron, half, transit))
    if plan.empty:
        return
    for subnet_id in plan.add_subnets:
        # A GET copies the subnet (and its network) with this region's gateway
        # address, which the interface then takes.
        if neutron.get("subnets", subnet_id) is None:
            raise RetryLater(f"{region} cannot copy subnet {subnet_id} yet")
        LOG.info("router half %s in %s: interface on subnet %s", half, region, subnet_id)
        try:
            neutron.action("routers", half, "add_router_interface", {"subnet_id": subnet_id})
        except Rejected as err:
            if err.status != 409 and err.status != 400:
                raise
            if subnet_id not in _half_state(neutron, half, transit).subnets:
                raise
    if plan.clear_gateway:
        LOG.info("router half %s in %s: clearing its gateway", half, region)
        neutron.update("routers", half, {"external_gateway_info": {}})
    if plan.set_gateway is not None:
        neutron.get("networks", plan.set_gateway.network_id)  # copies the external network here
        LOG.info("router half %s in %s: gateway on %s", half, region, plan.set_gateway.network_id)
        neutron.update("routers", half, {"external_gateway_info": l3_plans.gateway_body(plan.set_gateway)})
    if plan.routes is not None:
        LOG.info("router half %s in %s: %d routes", half, region, len(plan.routes))
        neutron.update("routers", half, {"routes": [r.body() for r in plan.routes]})
    for subnet_id in plan.remove_subnets:
        LOG.info("router half %s in %s: removing its interface on subnet %s", half, region, subnet_id)
        _remove_interface(neutron, half, {"subnet_id": subnet_id})


def _remove_interface(neutron: NeutronClient, half: str, request: dict) -> None:
    try:
        neutron.action("routers", half, "remove_router_interface", request)
    except Rejected as err:
        if err.status != 404:
            raise


# ------------------------------------------------------------------ floating IPs
def _remove_idle_fips(central: NeutronClient, neutron: NeutronClient, project_id: str) -> None:
    """Floating IPs Isthmus made that carry nothing any more: Neutron unhooks a
    floating IP from its router when its port (a shadow) goes, so a half's own
    list no longer shows it. Each goes once central has its floating IP no more
    or no longer on a port (central read, not guessed)."""
    idle = [f for f in neutron.list("floatingips", project_id=project_id)
            if l3_plans.tagged_fip(f) and not f.get("port_id")]
    for fip in idle:
        central_id = l3_plans.tagged_fip(fip)
        assert central_id  # idle ones are tagged
        at_central = central.get("floatingips", central_id)
        if at_central is None or not at_central.get("port_id"):
            LOG.info("floating IP %s (%s): idle and central's is gone or free; deleting", fip["id"],
                     fip.get("floating_ip_address"))
            neutron.delete("floatingips", fip["id"])


def _converge_fips(central: NeutronClient, neutron: NeutronClient, region: str, view: l3_plans.RouterView,
                   fips: list[l3_plans.FloatingIp]) -> list[dict]:
    """In the external network's region: one floating IP per central one, on
    the port (its copy, or its shadow when the server is in another region).
    Returns the region's floating IPs of the router as they are afterwards."""
    addresses = {f.address for f in fips}
    gateway = view.gateway
    assert gateway is not None  # called for the gateway's region only

    def ours() -> list[dict]:
        return [f for f in neutron.list("floatingips", floating_network_id=gateway.network_id)
                if l3_plans.tagged_fip(f) or f.get("floating_ip_address") in addresses]

    regional = ours()
    plan = l3_plans.plan_fips(fips, regional)
    if not (plan.delete or plan.move or plan.create):
        return regional
    for fip_id in plan.delete:
        LOG.info("floating IP %s in %s: central's left the router; deleting", fip_id, region)
        neutron.delete("floatingips", fip_id)
    for regional_id, fip in plan.move:
        _ensure_port_here(central, neutron, region, fip.port_id)
        neutron.update("floatingips", regional_id, {"port_id": fip.port_id, "fixed_ip_address": fip.fixed_ip,
                                                    "description": l3_plans.fip_description(fip.fip_id)})
    for fip in plan.create:
        _ensure_port_here(central, neutron, region, fip.port_id)
        LOG.info("floating IP %s (%s) in %s: creating on port %s", fip.fip_id, fip.address, region, fip.port_id)
        neutron.create("floatingips", {
            "floating_network_id": fip.network_id, "floating_ip_address": fip.address, "port_id": fip.port_id,
            "fixed_ip_address": fip.fixed_ip, "project_id": fip.project_id,
            "description": l3_plans.fip_description(fip.fip_id)})
    return ours()


def _ensure_port_here(central: NeutronClient, neutron: NeutronClient, region: str, port_id: str) -> None:
    """The port a floating IP points at must exist in the external network's
    region: the port itself if bound there, else its shadow (the half DNATs to
    it and L2 carries the packet to the server's region)."""
    port = central.get("ports", port_id)
    if port is None:
        raise RetryLater(f"port {port_id} not readable at central")
    found = [p for p in neutron.list("ports", network_id=port["network_id"], mac_address=port["mac_address"])
             if p["id"] == port_id]
    if found:
        return
    if bound_region(port) == region:
        raise RetryLater(f"port {port_id} is not in {region} yet")
    LOG.info("port %s in %s: shadow for a floating IP", port_id, region)
    try:
        neutron.create("ports", plans.shadow_body(port))
    except Rejected as err:
        if err.status != 409:
            raise


# ------------------------------------------------------------- status at central
def _report_status(central: NeutronClient, view: l3_plans.RouterView, fips: list[l3_plans.FloatingIp],
                   central_ports: list[dict], half_ports: dict[str, list[dict]],
                   regional_fips: list[dict]) -> list[str]:
    """Make the status of central's router ports and floating IPs tell what the
    regions show. A region not read this pass (unreachable) changes nothing it
    takes part in. Returns what is not ACTIVE in the regions yet."""
    waiting: list[str] = []
    try:
        for port in central_ports:
            counterparts = _counterparts(view, port, half_ports)
            if counterparts is None:
                continue
            waiting += [f"port {port['id']} in {r}" for r, p in sorted(counterparts.items())
                        if p is None or p.get("status") != l3_plans.ACTIVE]
            binding = l3_plans.router_port_binding(port, counterparts)
            if binding is not None:
                LOG.info("router %s: central port %s %s", view.router_id, port["id"],
                         "bound" if binding["binding:host_id"] else "unbound")
                central.update("ports", port["id"], binding)
        if view.gateway is not None and view.gateway.region in half_ports:
            waiting += _report_fip_status(central, view.gateway.region, fips, regional_fips)
    except (Unavailable, Rejected) as err:
        LOG.warning("router %s: status not reported to central: %s", view.router_id, err)
    return waiting


def _counterparts(view: l3_plans.RouterView, port: dict,
                  half_ports: dict[str, list[dict]]) -> dict[str, dict | None] | None:
    """Each region's port that central's router ``port`` stands for (None: not
    made there yet); None when a region it needs was not read this pass."""
    owner = port.get("device_owner")
    if owner == GATEWAY_OWNER and view.gateway is not None:
        needed = {view.gateway.region: lambda p: p.get("device_owner") == GATEWAY_OWNER}
    elif owner == INTERFACE_OWNER:
        subnets = {ip["subnet_id"] for ip in port.get("fixed_ips") or []}
        regions = set().union(*(a.regions for a in view.attached if a.subnet_id in subnets))
        needed = {region: lambda p: p.get("device_owner") == INTERFACE_OWNER and bool(
            subnets & {ip["subnet_id"] for ip in p.get("fixed_ips") or []}) for region in regions}
    else:
        return None
    if not needed.keys() <= half_ports.keys():
        return None
    return {region: next((p for p in half_ports[region] if matches(p)), None) for region, matches in needed.items()}


def _report_fip_status(central: NeutronClient, region: str, fips: list[l3_plans.FloatingIp],
                       regional: list[dict]) -> list[str]:
    """Central's floating IPs take their regional counterparts' status, through
    a report on their own port (central's driver sets the status)."""
    changed = {f.fip_id: status for f in fips
               if (status := l3_plans.floatingip_status(f, regional)) != f.status}
    waiting = [f"floating IP {f.address}" for f in fips if l3_plans.floatingip_status(f, regional) != l3_plans.ACTIVE]
    if changed:
        for port in central.list("ports", device_owner=FLOATINGIP_OWNER, device_id=sorted(changed)):
            status = changed[port["device_id"]]
            LOG.info("floating IP %s at central: %s (as in %s)", port["device_id"], status, region)
            central.update("ports", port["id"], l3_plans.floatingip_report(region, status))
    return waiting
