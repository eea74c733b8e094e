"""``binding_sync``: central's record of where ports are bound, repaired from a
region's own state (the backstop of the local plugin's reports).

The local plugin retries its reports until central has them, but a restart of
its neutron-server loses what was still queued. Per region, periodically:

* a port bound here that central records unbound (or bound to another host
  here) gets its binding reported, as the region would have;
* a port central records bound here but unbound here gets unbound at central;
* a port central records bound here that the region no longer has is **not**
  taken for deleted: a region restored from a backup, or rebuilt, looks just
  the same. Its device decides. Nova's own "not found" for the server is
  proof the port went with it: the port is deleted at central. A device Nova
  still has (or a port without a server) gets its copy back here, bound to the
  host central records, with central's UUID, MAC and IPs. Nova unreachable:
  nothing is done. A port changed at central in the last
  ``[isthmus] binding_sync_grace``, or held
  by another region, is left for later; so is a port bound or unbound here in
  the last grace (the region's own report of it is on its way).
* Deletes made here while central was down reach central through the local
  plugin's delete journal (written before the local delete), not from here.

The brake: a pass that would delete at central more than a small share of the
ports bound in a region deletes none, says so (log, metric
``isthmus_binding_sync_ports{action="braked"}``, the job's error) and waits
for an operator: a mass loss is a restore or a misconfigured Nova far more
often than a mass delete.

A port two regions both hold bound is left as it is and logged: which one is
right is not for a reconciler to guess.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from prometheus_client import Counter

from isthmus.clients import NeutronClient, Rejected, Unavailable
from isthmus.clients.ovsdb import OvsdbUnavailable
from isthmus.jobs import JobContext, PermanentFailure, RetryLater
from isthmus.network import bound_region, jobtypes, port_report, report_differs
from isthmus.network.reconcilers import plans
from isthmus.network.reconcilers.ovn.access import OvnAccess
from isthmus.network.reconcilers.ovn.wiring import collect_chassis
from isthmus.network.reconcilers.regions import Regions
from isthmus.network.reconcilers.settings import DeleteBrake
from isthmus.network.reconcilers.topology import Topology

LOG = logging.getLogger(__name__)
PORTS = Counter("isthmus_binding_sync_ports", "Ports central records bound in a region that the region lacks, "
                "by what binding_sync did: restored (copy made again), deleted (Nova: the server is gone), "
                "braked (deletes refused: too many at once)", ("region", "action"))
CENTRAL_LIST_TTL = 10.0  # seconds one list of central's ports serves the regions' passes
_FIELDS = ("id", "network_id", "mac_address", "device_owner", "device_id", "binding:host_id", "binding:profile",
           "binding:vif_type", "binding:vif_details", "binding:vnic_type", "revision_number", "updated_at")


class SharedRead:
    """The last read, given to every caller within ``ttl`` seconds of its start;
    one read at a time (callers meanwhile wait for it). A failed read is not kept."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._value: list[dict] | None = None
        self._started = 0.0

    def get(self, read: Callable[[], list[dict]]) -> list[dict]:
        with self._lock:
            if self._value is None or self.clock() - self._started > self.ttl:
                self._value = None
                started = self.clock()
                self._value, self._started = read(), started
            return self._value


def _user_port(port: dict) -> bool:
    return not (port.get("device_owner") or "").startswith("network:") and not plans.is_shadow(port)


@dataclass(frozen=True)
class BindingSync:
    """The ``binding_sync`` handler (keyed by region)."""

    regions: Regions
    topology: Topology  # the other regions, asked whether they hold a port
    brake: DeleteBrake  # [isthmus] binding_sync_delete_share and _floor
    grace: timedelta  # [isthmus] binding_sync_grace
    ovn: OvnAccess  # the region's chassis collection, on ML2/OVN

    # One list of central's ports serves the regions' periodic passes, which the
    # resync queues together: at 2,000 ports a list costs central seconds, and
    # once per region it was a pass's main load there. Every write made from it
    # is conditional on the revision it read, so an older read can only make a
    # write fail (412) and wait for the next pass.
    central_ports: SharedRead = field(default_factory=lambda: SharedRead(CENTRAL_LIST_TTL))

    def run(self, ctx: JobContext) -> None:
        region = ctx.resource_id
        neutron = self.regions.neutron(region)
        try:
            listed_central = (self.central_ports.get(self._list_central) if ctx.hinted(jobtypes.BACKSTOP_ONLY)
                              else self._list_central())  # an event's or an operator's run reads now
            central = {p["id"]: p for p in listed_central if _user_port(p)}
            listed = neutron.list("ports", fields=list(_FIELDS))
        except Unavailable as err:
            raise RetryLater(str(err)) from err
        regional = {p["id"]: p for p in listed if _user_port(p)}
        # Held here, whatever its owner here: a router's transit port is central's
        # user port but the region's router interface (router_sync reports it).
        present = {p["id"] for p in listed if not plans.is_shadow(p)}
        agents: dict[str, dict | None] = {}
        repaired = 0
        for port_id, here in regional.items():
            top = central.get(port_id)
            if top is None:
                continue  # a region-only port, or one central deleted (network_sync's part)
            owner = bound_region(top)
            if here.get("binding:host_id"):
                if owner not in (None, region):
                    LOG.warning("port %s is bound in %s and in %s; left as it is", port_id, region, owner)
                    continue
                report = port_report(region, here, host_agent(neutron, here["binding:host_id"], agents))
            elif owner == region:
                report = port_report(region, here, None)  # unbound here; central missed it
            else:
                continue
            if report_differs(top, report):
                if not _settled(here, self.grace):
                    # Changed here just now: the local plugin's own report, sent in
                    # the same request, is on its way. Repairing it too would race
                    # it and make central's change (and its jobs) twice.
                    continue
                LOG.info("port %s: repairing central's binding record from %s", port_id, region)
                try:
                    self.regions.central.update("ports", port_id, report, if_revision=top.get("revision_number"))
                except Rejected as err:
                    if err.status != 412:
                        raise
                    continue  # changed at central since our read: the next pass reads it again
                repaired += 1
        missing = [top for port_id, top in central.items()
                   if bound_region(top) == region and port_id not in present and _settled(top, self.grace)]
        if missing:
            bound = sum(1 for top in central.values() if bound_region(top) == region)
            repaired += self._settle_missing(region, missing, bound)
        if repaired:
            LOG.info("binding_sync %s: %d repaired", region, repaired)
        ovn = self.ovn.region(region)
        if ovn is not None:
            # The region's periodic pass also collects remote chassis nothing names.
            try:
                collect_chassis(ovn, seen=self.ovn.unreferenced_chassis(region))
            except OvsdbUnavailable as err:
                raise RetryLater(f"{region} OVN: {err}") from err

    def _list_central(self) -> list[dict]:
        return self.regions.central.list("ports", fields=list(_FIELDS))

    def _settle_missing(self, region: str, missing: list[dict], bound: int) -> int:
        """Restore or delete (on Nova's word) the ports bound here the region lacks;
        how many. Raises PermanentFailure, after the restores, when the brake holds."""
        gone: list[dict] = []
        restore: list[dict] = []
        for top in missing:
            if self._held_elsewhere(region, top):
                continue
            verdict = self._device_gone(region, top)
            if verdict is None:
                continue  # Nova could not say: no proof either way
            (gone if verdict else restore).append(top)
        done = 0
        for top in restore:
            if _restore_copy(self.regions.neutron(region), region, top):
                PORTS.labels(region, "restored").inc()
                done += 1
        if not gone:
            return done
        if not self.brake.allows(len(gone), bound):
            PORTS.labels(region, "braked").inc(len(gone))
            message = (f"binding_sync {region}: {len(gone)} of the {bound} ports bound there have servers Nova no "
                       f"longer has; more than the brake allows at once ({self.brake}), so none was "
                       f"deleted at central. Check the region (a restore? the wrong Nova?); to let them go, raise "
                       f"[isthmus] binding_sync_delete_share and run binding_sync again. Ports: "
                       + ", ".join(sorted(top["id"] for top in gone)))
            LOG.error("%s", message)
            raise PermanentFailure(message)
        for top in gone:
            LOG.info("port %s: its server %s is gone from %s's Nova and the port from its Neutron; deleting it "
                     "at central", top["id"], top.get("device_id"), region)
            try:
                self.regions.central.delete("ports", top["id"], if_revision=top.get("revision_number"))
            except Rejected as err:
                if err.status != 412:
                    raise
                LOG.info("port %s changed at central since this pass read it; left for the next pass", top["id"])
                continue
            PORTS.labels(region, "deleted").inc()
            done += 1
        return done

    def _device_gone(self, region: str, port: dict) -> bool | None:
        """Nova's word on a port's server: True gone, False there, None no answer.
        A port without a server has nothing to be deleted with: False."""
        if not plans.is_compute(port) or not port.get("device_id"):
            return False
        try:
            return self.regions.nova(region).server_gone(port["device_id"])
        except (Unavailable, ValueError) as err:
            LOG.warning("port %s: missing in %s, and Nova cannot say whether server %s is gone: %s",
                        port["id"], region, port.get("device_id"), err)
            return None

    def _held_elsewhere(self, region: str, port: dict) -> bool:
        """Whether another region holds the port as its own (it moved there, and its
        report was lost too). Unreachable regions make the answer "yes": no proof."""
        for other in self.topology.regions():
            if other == region:
                continue
            try:
                found = self.regions.neutron(other).list(
                    "ports", network_id=port["network_id"], mac_address=port["mac_address"])
            except Unavailable:
                return True
            if any(p["id"] == port["id"] and not plans.is_shadow(p) for p in found):
                return True
        return False


def _restore_copy(neutron: NeutronClient, region: str, top: dict) -> bool:
    """The region's copy made again (a read by id copies it, as for any missing
    copy) and bound to the host central records, so the server's address is back."""
    LOG.warning("port %s: central records it bound in %s, which lacks it (restored from a backup?); "
                "copying it back", top["id"], region)
    copy = neutron.get("ports", top["id"])
    if copy is None:
        LOG.error("port %s: %s would not copy it back", top["id"], region)
        return False
    if top.get("binding:host_id") and not copy.get("binding:host_id"):
        neutron.update("ports", top["id"], {k: top[k] for k in _REBIND if top.get(k)})
    return True


_REBIND = ("binding:host_id", "binding:vnic_type", "device_id", "device_owner")


def host_agent(neutron: NeutronClient, host: str, cache: dict[str, dict | None] | None = None) -> dict | None:
    """The real (not shadow) L2 agent of ``host`` in the region, as a report names it."""
    cache = {} if cache is None else cache
    if not host:
        return None
    if host not in cache:
        cache[host] = None
        for agent in neutron.list("agents", host=host, agent_type="Open vSwitch agent"):
            tunnel_ip = (agent.get("configurations") or {}).get("tunneling_ip")
            if tunnel_ip and not (agent.get("configurations") or {}).get("isthmus_shadow_of"):
                cache[host] = {"type": agent["agent_type"], "host": host, "tunnel_ip": tunnel_ip}
                break
    return cache[host]


def _settled(port: dict, grace: timedelta) -> bool:
    return bool(port.get("updated_at")) and not plans.changed_within(port, grace)
