"""``port_sync``: one central port's user-settable fields reach its regional copies.

Event-driven and incremental: central's driver queues it when a user changes a
port there, and it touches that port only, one list call and at most one update
per region (a security change that never reaches the enforcing region is a
security hole, so this is not left to the periodic pass). Shadows follow a
changed MAC or address (remade); their other fields do not matter to them.
"""

from __future__ import annotations

import logging
from isthmus.clients import NeutronClient, Rejected, Unavailable
from isthmus.jobs import JobContext, RetryLater
from isthmus.network.reconcilers import plans
from isthmus.network.reconcilers.fanout import in_every_region
from isthmus.network.reconcilers.services import Services

LOG = logging.getLogger(__name__)


def sync_port(services: Services, ctx: JobContext) -> None:
    port_id = ctx.resource_id
    try:
        central = services.central.get("ports", port_id)
    except Unavailable as err:
        raise RetryLater(f"central: {err}") from err
    if central is None:
        return  # deleted: network_sync removes the copies, on central's recorded delete
    regions = [p.region_name for p in services.registry.regional_pods()]
    in_every_region(regions, lambda region: _sync_region(services, region, central), f"port {port_id}")


def _sync_region(services: Services, region: str, central: dict) -> None:
    neutron = services.neutron(region)
    # Filtered by network and MAC: answered from the region's own database (a
    # filter by id would make the local plugin copy the port, which is not ours to
    # do). A changed MAC misses the old copy here: central queues network_sync too.
    found = neutron.list("ports", network_id=central["network_id"], mac_address=central["mac_address"])
    for port in found:
        if port["id"] != central["id"]:
            continue
        if plans.is_shadow(port):
            _refresh_shadow(neutron, region, port, central)
        else:
            update_copy(services, neutron, region, port, central)


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
    neutron.update("ports", central["id"], changes)


def _refresh_shadow(neutron: NeutronClient, region: str, shadow: dict, central: dict) -> None:
    """A shadow stands for an address and a MAC: remade when they moved."""
    if not plans.shadow_is_stale(shadow, central):
        return
    LOG.info("port %s in %s: remaking its shadow", central["id"], region)
    neutron.delete("ports", shadow["id"])
    try:
        neutron.create("ports", plans.shadow_body(central))
    except Rejected as err:
        if err.status != 409:
            raise
