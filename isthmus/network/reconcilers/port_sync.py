"""``port_sync``: one central port, everywhere. Event-driven and incremental.

Central's driver queues it when a user changes a port there, when a region
reports the port bound, unbound or moved, and when the port is deleted. It
touches that port only: per region one list call (by network and MAC, answered
from the region's own database) and at most a few writes, however many ports
the network has:

* the regional copy shows central's user-settable fields (a security change
  that never reaches the enforcing region is a security hole);
* every region that has ports of its own on the network holds a shadow of the
  port where it is bound elsewhere, remade when its MAC, addresses or host moved;
* copies and shadows go when central recorded the port's delete.

``network_sync`` plans whole networks: on first use of a network in a region,
on network and subnet changes, and periodically, as the backstop.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from isthmus.clients import NeutronClient, Rejected, Unavailable
from isthmus.jobs import JobContext, RetryLater
from isthmus.network import bound_region
from isthmus.network.reconcilers import plans
from isthmus.network.reconcilers.fanout import in_every_region
from isthmus.network.reconcilers.ovn import wiring as ovn_wiring
from isthmus.network.reconcilers.services import Services
from isthmus.network.reconcilers.writes import delete_as_read, update_as_read

LOG = logging.getLogger(__name__)


def payload(network_id: str, *macs: str | None) -> dict:
    """What a port_sync needs when central no longer has the port (deleted) or
    its MAC changed: where to look for the old copies."""
    return {"network_id": network_id, "macs": sorted({m for m in macs if m})}


def sync_port(services: Services, ctx: JobContext) -> None:
    port_id = ctx.resource_id
    try:
        central = services.central.get("ports", port_id)
    except Unavailable as err:
        raise RetryLater(f"central: {err}") from err
    network_id = central["network_id"] if central else ctx.payload.get("network_id")
    macs = set(ctx.payload.get("macs") or []) | ({central["mac_address"]} if central else set())
    deleted = central is None and services.tombstones.is_buried("port", port_id)
    if not network_id or not macs or (central is None and not deleted):
        return  # central lacks it and recorded no delete: nothing is proof of anything
    try:
        shadows = services.network_wants_shadows(network_id)
    except Unavailable as err:
        raise RetryLater(f"central: {err}") from err
    routed = services.routed_regions(network_id)
    regions = [p.region_name for p in services.registry.regional_pods()]
    hypervisors = ovn_wiring.Hypervisors(services.ovn_regions)

    def sync_region(region: str) -> None:
        neutron = services.neutron(region)
        copies = _copies(neutron, port_id, network_id, macs)
        plan = plans.plan_port(region, central, copies, shadows=shadows and services.binds_shadows(region),
                               local_members=region in routed, deleted=deleted)
        apply(services, neutron, region, plan, {port_id: central} if central else {}, copies)
        ovn = services.ovn(region)
        if ovn is not None and shadows and services.tunnel_keys is not None:
            ovn_wiring.sync_port(ovn, network_id, port_id, central, deleted, services.tunnel_keys, hypervisors)

    in_every_region(regions, sync_region, f"port {port_id}")
    if deleted and services.ovn_regions and services.tunnel_keys is not None:
        # Every region dropped its remote port (a failed region raised above): the
        # key may serve another port now without two ports sharing it anywhere.
        services.tunnel_keys.release_port(network_id, port_id)


def _copies(neutron: NeutronClient, port_id: str, network_id: str, macs: set[str]) -> list[dict]:
    # By network and MAC: a filter by id would make the local plugin copy the
    # port, which is not ours to do.
    found: dict[str, dict] = {}
    for mac in sorted(macs):
        for port in neutron.list("ports", network_id=network_id, mac_address=mac):
            if port["id"] == port_id:
                found[port["id"] + port.get("device_owner", "")] = port
    return list(found.values())


def apply(services: Services, neutron: NeutronClient, region: str, plan: plans.PortPlan,
          central: Mapping[str, dict], regional: list[dict]) -> None:
    """Carry out a port plan in one region: ``central`` by id, ``regional`` the
    region's ports the plan was made from (shared with network_sync)."""
    by_id = {p["id"]: p for p in regional}
    for port_id in plan.delete:
        original = central.get(port_id)
        # Deleting a regional compute port deletes it at central too (local
        # plugin) where central says it lives: never do that to a live port.
        if plans.is_compute(by_id[port_id]) and original is not None and bound_region(original) == region:
            continue
        if not plans.is_shadow(by_id[port_id]) and original is not None and not _still_elsewhere(services, port_id,
                                                                                              region):
            # Planned as the stale copy of a port bound elsewhere, from a read that may be
            # old. The local plugin keeps this worker's deletes in the region (and the
            # delete is conditional on the copy's revision); this re-read is the second
            # guard, for a deployment whose worker and local plugin are different users.
            LOG.info("port %s in %s: no longer bound elsewhere at central; copy kept", port_id, region)
            continue
        LOG.info("port %s in %s: deleting %s", port_id, region,
                 "shadow" if plans.is_shadow(by_id[port_id]) else "copy")
        delete_as_read(neutron, "ports", by_id[port_id])
    for port in regional:
        original = central.get(port["id"])
        if original is not None and port["id"] not in plan.delete and not plans.is_shadow(port) \
                and not (port.get("device_owner") or "").startswith("network:"):
            update_copy(services, neutron, region, port, original)
    for body in plan.create_shadows:
        LOG.info("port %s in %s: shadow", plans.shadow_of(body), region)
        try:
            neutron.create("ports", body)
        except Rejected as err:
            if err.status != 409:  # 409: created concurrently, converged
                raise


def _still_elsewhere(services: Services, port_id: str, region: str) -> bool:
    """Central's current word: the port is bound in a region other than ``region``."""
    now = services.central.get("ports", port_id)
    return now is not None and bound_region(now) not in (None, region)


def update_copy(services: Services, neutron: NeutronClient, region: str, copy: dict, central: dict) -> None:
    changes = plans.port_changes(central, copy)
    if not changes:
        return
    pod = services.registry.find_pod(region)
    for group_id in set(central.get("security_groups") or []) - set(copy.get("security_groups") or []):
        # A group new to this region: a GET copies it (with its rules), and the
        # routing makes security_group_sync keep it (remote members, later edits).
        neutron.get("security-groups", group_id)
        if pod is not None:
            services.registry.ensure_routing(group_id, group_id, pod.pod_id, central["project_id"], "security_group")
    LOG.info("port %s in %s: updating %s", central["id"], region, sorted(changes))
    update_as_read(neutron, "ports", copy, changes)
