"""``binding_sync``: central's record of where ports are bound, repaired from a
region's own state (the backstop of the local plugin's reports).

The local plugin retries its reports until central has them, but a restart of
its neutron-server loses what was still queued. Per region, periodically:

* a port bound here that central records unbound (or bound to another host
  here) gets its binding reported, as the region would have;
* a port central records bound here but unbound here gets unbound at central;
* a port central records bound here that the region no longer has, and that
  no other region holds either, was deleted here while central was unreachable:
  it is deleted at central. Proof is the region's complete list (it pages to
  the end, and an unreachable region changes nothing) plus every other region's
  answer; a port changed at central in the last ``GRACE`` is left for later.

A port two regions both hold bound is left as it is and logged: which one is
right is not for a reconciler to guess.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from isthmus.clients import NeutronClient, Rejected, Unavailable
from isthmus.jobs import JobContext, RetryLater
from isthmus.network import bound_region, port_report, report_differs
from isthmus.network.reconcilers import plans
from isthmus.network.reconcilers.services import Services

LOG = logging.getLogger(__name__)
GRACE = timedelta(minutes=2)
_FIELDS = ("id", "network_id", "mac_address", "device_owner", "device_id", "binding:host_id", "binding:profile",
           "binding:vif_type", "binding:vif_details", "binding:vnic_type", "revision_number", "updated_at")


def _user_port(port: dict) -> bool:
    return not (port.get("device_owner") or "").startswith("network:") and not plans.is_shadow(port)


def sync_bindings(services: Services, ctx: JobContext) -> None:
    region = ctx.resource_id
    neutron = services.neutron(region)
    try:
        central = {p["id"]: p for p in services.central.list("ports", fields=list(_FIELDS)) if _user_port(p)}
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
            LOG.info("port %s: repairing central's binding record from %s", port_id, region)
            try:
                services.central.update("ports", port_id, report, if_revision=top.get("revision_number"))
            except Rejected as err:
                if err.status != 412:
                    raise
                continue  # changed at central since our read: the next pass reads it again
            repaired += 1
    for port_id, top in central.items():
        if bound_region(top) == region and port_id not in present and _settled(top):
            if _held_elsewhere(services, region, top):
                continue
            LOG.info("port %s: deleted in %s while central was unreachable; deleting it at central", port_id, region)
            services.central.delete("ports", port_id)
            repaired += 1
    if repaired:
        LOG.info("binding_sync %s: %d repaired", region, repaired)


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


def _settled(port: dict) -> bool:
    stamp = port.get("updated_at")
    if not stamp:
        return False
    changed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    if changed.tzinfo is None:
        changed = changed.replace(tzinfo=UTC)
    return datetime.now(UTC) - changed > GRACE


def _held_elsewhere(services: Services, region: str, port: dict) -> bool:
    """Whether another region holds the port as its own (it moved there, and its
    report was lost too). Unreachable regions make the answer "yes": no proof."""
    for pod in services.registry.regional_pods():
        if pod.region_name == region:
            continue
        try:
            found = services.neutron(pod.region_name).list(
                "ports", network_id=port["network_id"], mac_address=port["mac_address"])
        except Unavailable:
            return True
        if any(p["id"] == port["id"] and not plans.is_shadow(p) for p in found):
            return True
    return False
