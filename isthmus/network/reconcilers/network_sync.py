"""``network_sync``: make every regional copy of a network converge on central.

Level-triggered: it reads central and each routed region and repairs whatever
differs, so it is safe to run twice, after a crash, or after an outage. A region
that cannot be reached is skipped and the job retried later (RetryLater): it is
never read as "the copy is gone", and nothing is deleted because of it.
"""

from __future__ import annotations

import logging

from prometheus_client import Counter

from isthmus.clients import NeutronClient, Unavailable
from isthmus.jobs import JobContext, PermanentFailure, RetryLater
from isthmus.network.reconcilers import plans
from isthmus.network.reconcilers.fanout import in_every_region
from isthmus.network.reconcilers.ovn import wiring as ovn_wiring
from isthmus.network.reconcilers.port_sync import apply
from isthmus.network.reconcilers.services import Services
from isthmus.network.reconcilers.writes import update_as_read

LOG = logging.getLogger(__name__)
UNPROVEN = Counter("isthmus_unproven_copies", "Regional copies and shadows of ports central has no port for and "
                   "recorded no delete of, seen by network_sync (kept: no delete without proof)", ("region",))


def sync_network(services: Services, ctx: JobContext) -> None:
    network_id = ctx.resource_id
    try:
        central = services.central.get("networks", network_id)
        subnets = services.central.list("subnets", network_id=network_id) if central else []
    except Unavailable as err:
        raise RetryLater(f"central: {err}") from err
    # Every region, not only the routed ones (where ports were bound): a copy
    # made by a mere lookup has no routing, yet holds copies of central's ports
    # and addresses that must go when central's go.
    routed = services.routed_regions(network_id)
    regions = [p.region_name for p in services.registry.regional_pods()]
    shadows = central is not None and services.wants_shadows(central)

    if central is None and not services.tombstones.is_buried("network", network_id):
        # Outages are not deletions: a 404 that central never recorded as its own
        # delete (a restore, a misrouted request) changes nothing. The periodic
        # resync runs this again; copies stay until central's delete is recorded.
        raise PermanentFailure(f"central has no network {network_id} but recorded no delete of it; "
                               "regional copies kept")

    def sync_region(region: str) -> None:
        neutron = services.neutron(region)
        if central is None:
            _remove_copy(neutron, network_id)
        elif region in routed or _holds_copy(neutron, network_id):
            _converge(services, neutron, region, central, subnets, shadows)

    in_every_region(regions, sync_region, f"network {network_id}")
    if central is None:
        services.registry.forget(network_id, "network")
        if services.tunnel_keys is not None:
            services.tunnel_keys.release_network(network_id)  # every copy, with its switch, is gone


def _holds_copy(neutron: NeutronClient, network_id: str) -> bool:
    """Without copying it: lists filtered by network_id are answered locally
    (a GET of the network would make the local plugin copy it)."""
    return bool(neutron.list("subnets", network_id=network_id, fields="id")
                or neutron.list("ports", network_id=network_id, fields="id"))


def _converge(services: Services, neutron: NeutronClient, region: str, central: dict, subnets: list[dict],
              shadows: bool) -> None:
    top = services.central
    # A GET by id makes the local plugin copy a network it lost (drift repair).
    copy = neutron.get("networks", central["id"])
    if copy is None:
        LOG.info("network %s: %s holds no copy and central does not place it there", central["id"], region)
        return
    changes = plans.changed_fields(central, copy, plans.NETWORK_FIELDS)
    if changes:
        LOG.info("network %s in %s: updating %s", central["id"], region, sorted(changes))
        update_as_read(neutron, "networks", copy, changes)
    central_subnets = {s["id"] for s in subnets}
    for subnet in subnets:
        regional = neutron.get("subnets", subnet["id"])
        if regional is None:
            continue
        changes = plans.changed_fields(subnet, regional, plans.SUBNET_FIELDS)
        if changes:
            LOG.info("subnet %s in %s: updating %s", subnet["id"], region, sorted(changes))
            update_as_read(neutron, "subnets", regional, changes)
    # Regional ports first, central's second: a port is created at central before
    # its regional copy, so every regional port listed here is in central's list
    # unless central deleted it. (The other order deletes ports being created.)
    regional_ports = neutron.list("ports", network_id=central["id"])
    central_ports = top.list("ports", network_id=central["id"])
    missing = plans.missing_at_central(central_ports, regional_ports)
    deleted = services.tombstones.buried("port", missing)
    unproven = missing - deleted
    if unproven:
        # Kept (no proof of a delete), never silently: counted, logged, and shown
        # by the topology ("gone at central").
        UNPROVEN.labels(region).inc(len(unproven))
        LOG.warning("network %s in %s: central has no port %s and recorded no delete of it; copies kept",
                    central["id"], region, ", ".join(sorted(unproven)))
    plan = plans.plan_ports(region, central_ports, regional_ports, shadows and services.binds_shadows(region), deleted)
    apply(services, neutron, region, plan, {p["id"]: p for p in central_ports}, regional_ports)
    ovn = services.ovn(region)
    if ovn is not None and shadows and services.tunnel_keys is not None:
        ovn_wiring.sync_network(ovn, central["id"], central_ports, services.tunnel_keys,
                                ovn_wiring.Hypervisors(services.ovn_regions), deleted)
    stray = [s for s in neutron.list("subnets", network_id=central["id"]) if s["id"] not in central_subnets]
    deleted_subnets = services.tombstones.buried("subnet", [s["id"] for s in stray])
    for regional in stray:
        if regional["id"] in deleted_subnets:
            _remove_subnet(neutron, regional)


def _remove_subnet(neutron: NeutronClient, subnet: dict) -> None:
    """A subnet deleted at central: drop the regional copy (its auto ports go with it)."""
    LOG.info("subnet %s was deleted at central; deleting its copy", subnet["id"])
    for port in neutron.list("ports", network_id=subnet["network_id"]):
        if plans.is_shadow(port) or (port.get("device_owner") or "").startswith("network:dhcp"):
            if any(ip["subnet_id"] == subnet["id"] for ip in port.get("fixed_ips") or []):
                neutron.delete("ports", port["id"])
    neutron.delete("subnets", subnet["id"])


def _remove_copy(neutron: NeutronClient, network_id: str) -> None:
    """Central deleted the network (it refused while user ports remained): remove
    the copy with its ports (DHCP copies, shadows, copies of deleted user ports)."""
    # Every port: central refuses the delete while user ports remain, so what is
    # left here are copies of deleted ports, including unbound ones Nova left
    # (device_owner ""), which would otherwise keep the network in use (409).
    for port in neutron.list("ports", network_id=network_id):
        owner = port.get("device_owner")
        # Router halves' ports and floating IPs (router_sync may not have run
        # yet): Neutron removes them only through their router or floating IP.
        if owner == plans.ROUTER_INTERFACE_OWNER and port.get("device_id"):
            neutron.action("routers", port["device_id"], "remove_router_interface", {"port_id": port["id"]})
        elif owner == "network:router_gateway" and port.get("device_id"):
            neutron.update("routers", port["device_id"], {"external_gateway_info": {}})
        elif owner == "network:floatingip" and port.get("device_id"):
            neutron.delete("floatingips", port["device_id"])
        else:
            neutron.delete("ports", port["id"])
    if neutron.delete("networks", network_id):
        LOG.info("network %s deleted at central: copy removed", network_id)
