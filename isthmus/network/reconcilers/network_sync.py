"""``network_sync``: make every regional copy of a network converge on central.

Level-triggered: it reads central and each routed region and repairs whatever
differs, so it is safe to run twice, after a crash, or after an outage. A region
that cannot be reached is skipped and the job retried later (RetryLater): it is
never read as "the copy is gone", and nothing is deleted because of it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from prometheus_client import Counter

from isthmus.clients import NeutronClient, Unavailable
from isthmus.jobs import JobContext, JobStore, PermanentFailure, RetryLater
from isthmus.network import copies, jobtypes
from isthmus.network.reconcilers import plans
from isthmus.network.reconcilers.fanout import RefusedByPolicy, in_every_region
from isthmus.network.reconcilers.ovn import wiring as ovn_wiring
from isthmus.network.reconcilers.ovn.access import OvnAccess
from isthmus.network.reconcilers.port_sync import PortWriter
from isthmus.network.reconcilers.regions import Regions
from isthmus.network.reconcilers.shadows import ShadowPolicy
from isthmus.network.reconcilers.topology import Topology
from isthmus.network.reconcilers.writes import update_as_read
from isthmus.registry import Registry, Tombstones

LOG = logging.getLogger(__name__)
# A periodic pass leaves ports central changed this recently to their own
# port_sync: the change's request queues it after its commit, so a pass that lists
# central in between would plan the port too. Far longer than that gap under load.
RECENT_CHANGE = timedelta(seconds=10)
UNPROVEN = Counter("isthmus_unproven_copies", "Regional copies and shadows of ports central has no port for and "
                   "recorded no delete of, seen by network_sync (kept: no delete without proof)", ("region",))


class PortSyncQueue(Protocol):
    def now(self) -> datetime:
        """The queue's clock."""
        ...

    def left(self, port_ids: list[str], backstop_since: datetime | None) -> set[str]:
        """Those ports whose port_sync is still to start; with ``backstop_since``
        (a periodic pass), also those whose port_sync is running or ended since."""
        ...


@dataclass(frozen=True)
class PortSyncJobs:
    """The port_sync jobs in the job store."""

    store: JobStore

    def now(self) -> datetime:
        return self.store.clock.now()

    def left(self, port_ids: list[str], backstop_since: datetime | None) -> set[str]:
        return self.store.waiting(jobtypes.PORT_SYNC, port_ids, or_running=backstop_since is not None,
                                  finished_since=backstop_since)


class NoQueue:
    """No queue to leave ports to: every port is planned."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def left(self, port_ids: list[str], backstop_since: datetime | None) -> set[str]:
        return set()


NO_QUEUE = NoQueue()


@dataclass(frozen=True)
class NetworkSync:
    """The ``network_sync`` handler (keyed by network)."""

    regions: Regions
    registry: Registry  # the network's routings, forgotten with it
    topology: Topology
    tombstones: Tombstones
    shadows: ShadowPolicy
    ovn: OvnAccess
    writer: PortWriter
    # Where this pass sees which ports have a port_sync of their own to leave them
    # to: that run reads central and the regions afresh and does all a plan here
    # would for them. Planning them here too raced it in a burst (one shadow made
    # twice; the second create refused, then read and converged).
    port_syncs: PortSyncQueue = field(default_factory=lambda: NO_QUEUE)

    def run(self, ctx: JobContext) -> None:
        network_id = ctx.resource_id
        backstop = ctx.hinted(jobtypes.BACKSTOP_ONLY)
        started = self.port_syncs.now() if backstop else None
        try:
            central = self.regions.central.get("networks", network_id)
            subnets = self.regions.central.list("subnets", network_id=network_id) if central else []
        except Unavailable as err:
            raise RetryLater(f"central: {err}") from err
        # Every region, not only the routed ones (where ports were bound): a copy
        # made by a mere lookup has no routing, yet holds copies of central's ports
        # and addresses that must go when central's go.
        routed = self.topology.routed_regions(network_id)
        regions = self.topology.regions()
        shadows = central is not None and self.shadows.wants_shadows(central)

        if central is None and not self.tombstones.is_buried("network", network_id):
            # Outages are not deletions: a 404 that central never recorded as its own
            # delete (a restore, a misrouted request) changes nothing. The periodic
            # resync runs this again; copies stay until central's delete is recorded.
            raise PermanentFailure(f"central has no network {network_id} but recorded no delete of it; "
                                   "regional copies kept")

        if central is None:
            in_every_region(regions, lambda region: _remove_copy(self.regions.neutron(region), network_id),
                            f"network {network_id}")
            self.registry.forget(network_id, "network")
            if self.ovn.keys is not None:
                self.ovn.keys.release_network(network_id)  # every copy, with its switch, is gone
            return

        # Regional ports first, central's second: a port is created at central before
        # its regional copy, so every regional port listed is in central's list unless
        # central deleted it. (The other order deletes ports being created.) So every
        # region is read, then central once for them all (once per region cost central
        # a full list of the network per region on every pass), then each is planned.
        held: dict[str, list[dict]] = {}

        def read_region(region: str) -> None:
            neutron = self.regions.neutron(region)
            if region in routed or _holds_copy(neutron, network_id):
                ports = self._converge_network(neutron, region, central, subnets)
                if ports is not None:
                    held[region] = ports

        unfinished = _failure_of(lambda: in_every_region(regions, read_region, f"network {network_id}"))
        if held:
            try:
                central_ports = self.regions.central.list("ports", network_id=network_id)
            except Unavailable as err:
                raise RetryLater(f"central: {err}") from err
            # A periodic pass also leaves the ports whose port_sync is running or ran
            # since this pass began reading, and those whose change's port_sync may not
            # be queued yet. A pass an event asked for (a network's first port in a
            # region) plans those too: their run may have read the regions before this
            # one was among them.
            left = self.port_syncs.left([p["id"] for p in central_ports], started)
            if backstop:
                left |= {p["id"] for p in central_ports if plans.changed_within(p, RECENT_CHANGE)}
            if left:
                LOG.info("network %s: %d port(s) left to their own port_sync", network_id, len(left))
            in_every_region(sorted(held), lambda region: self._converge_ports(
                region, central, subnets, shadows, central_ports, held[region], left), f"ports of {network_id}")
        if unfinished is not None:
            raise unfinished  # the regions that could not be read, once the others are done

    def _converge_network(self, neutron: NeutronClient, region: str, central: dict, subnets: list[dict]
                          ) -> list[dict] | None:
        """The copies of the network and its subnets made to match; the region's
        ports on it (None: the region holds no copy)."""
        # A GET by id makes the local plugin copy a network it lost (drift repair).
        copy = neutron.get("networks", central["id"])
        if copy is None:
            LOG.info("network %s: %s holds no copy and central does not place it there", central["id"], region)
            return None
        changes = copies.changed_fields(central, copy, plans.NETWORK_FIELDS)
        if changes:
            LOG.info("network %s in %s: updating %s", central["id"], region, sorted(changes))
            update_as_read(neutron, "networks", copy, changes)
        for subnet in subnets:
            regional = neutron.get("subnets", subnet["id"])
            if regional is None:
                continue
            changes = copies.changed_fields(subnet, regional, plans.SUBNET_FIELDS)
            if changes:
                LOG.info("subnet %s in %s: updating %s", subnet["id"], region, sorted(changes))
                update_as_read(neutron, "subnets", regional, changes)
        return neutron.list("ports", network_id=central["id"])

    def _converge_ports(self, region: str, central: dict, subnets: list[dict], shadows: bool,
                        central_ports: list[dict], regional_ports: list[dict], left: set[str]) -> None:
        """One region's copies and shadows of the network's ports, and its stray subnets."""
        neutron = self.regions.neutron(region)
        missing = plans.missing_at_central(central_ports, regional_ports)
        deleted = self.tombstones.buried("port", missing)
        unproven = missing - deleted
        if unproven:
            # Kept (no proof of a delete), never silently: counted, logged, and shown
            # by the topology ("gone at central").
            UNPROVEN.labels(region).inc(len(unproven))
            LOG.warning("network %s in %s: central has no port %s and recorded no delete of it; copies kept",
                        central["id"], region, ", ".join(sorted(unproven)))
        plan = plans.plan_ports(region, central_ports, regional_ports, shadows and self.shadows.binds_shadows(region),
                                deleted, left)
        # Without central's word on them, the writer leaves the copies of those ports as they are.
        self.writer.apply(neutron, region, plan, {p["id"]: p for p in central_ports if p["id"] not in left},
                          regional_ports)
        ovn = self.ovn.region(region)
        if ovn is not None and shadows and self.ovn.keys is not None:
            ovn_wiring.sync_network(ovn, central["id"], central_ports, self.ovn.keys, self.ovn.hypervisors(),
                                    deleted)
        central_subnets = {s["id"] for s in subnets}
        stray = [s for s in neutron.list("subnets", network_id=central["id"]) if s["id"] not in central_subnets]
        deleted_subnets = self.tombstones.buried("subnet", [s["id"] for s in stray])
        for regional in stray:
            if regional["id"] in deleted_subnets:
                _remove_subnet(neutron, regional)


def _failure_of(step: Callable[[], None]) -> Exception | None:
    """What ``in_every_region`` raised for the regions it could not finish (the
    others finished), kept to raise once the rest of the job is done."""
    try:
        step()
    except (RetryLater, PermanentFailure, RefusedByPolicy) as err:
        return err
    return None


def _holds_copy(neutron: NeutronClient, network_id: str) -> bool:
    """Without copying it: lists filtered by network_id are answered locally
    (a GET of the network would make the local plugin copy it)."""
    return bool(neutron.list("subnets", network_id=network_id, fields="id")
                or neutron.list("ports", network_id=network_id, fields="id"))


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
