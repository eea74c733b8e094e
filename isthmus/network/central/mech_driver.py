"""``isthmus_central``: the ML2 mechanism driver of central Neutron.

Uses only neutron-lib's MechanismDriver and callbacks APIs (stable across
Neutron releases):

* binds a port as the region that reported it bound (central runs no agents);
* reserves the shared DHCP address and each region's gateway address when a
  subnet is created, and releases them with the subnet;
* records where ports live (routings) and queues reconcile jobs after commits;
* records every delete (a tombstone) *before* it: in precommit, inside the
  delete's transaction. If the Isthmus database cannot take it, the delete is
  refused (503; a security group's 409 names the reason), never made without
  its record: a delete nobody recorded leaves copies and shadows that nothing
  may remove, and once central reuses the address, traffic goes astray. A
  record whose delete then rolled back proves nothing: a reconciler acts only
  on the record *and* central's 404.
"""

from __future__ import annotations

import logging

from neutron_lib import constants
from neutron_lib import exceptions as n_exc
from neutron_lib.api.definitions import portbindings
from neutron_lib.callbacks import events, registry, resources
from neutron_lib.plugins import constants as plugin_constants
from neutron_lib.plugins import directory
from neutron_lib.plugins import utils as plugin_utils
from neutron_lib.plugins.ml2 import api

from isthmus.network import (
    DHCP_RESERVATION_DEVICE,
    GATEWAY_RESERVATION_DEVICE,
    SHADOW_OWNER,
    binding_report,
    copies,
    dhcp_reservation_name,
    gateway_reservation_name,
    jobtypes,
    members,
)
from isthmus.network.central.state import state
from isthmus.network.l3_status import set_floatingip_status

LOG = logging.getLogger(__name__)


def _report(port: dict) -> dict | None:
    report = binding_report(port)
    return report if report and report.get("region") else None


def _first_bind_region(port: dict, before: dict, copy_changed: bool) -> str | None:
    """The region of the port's first binding report, when the event is that and
    nothing else: never bound or reported before, no field a copy shows changed."""
    report = _report(port)
    if (report is None or _report(before) is not None or before.get(portbindings.HOST_ID)
            or port.get("mac_address") != before.get("mac_address") or copy_changed):
        return None
    return report["region"]


def _is_user_port(port: dict) -> bool:
    """A port a user owns and regions copy (not DHCP, router or reservation ports, not shadows)."""
    owner = port.get("device_owner") or ""
    return not owner.startswith("network:") and owner != SHADOW_OWNER


class DeleteNotRecorded(n_exc.ServiceUnavailable):
    message = ("the delete of %(resource)s %(id)s could not be recorded for the regions (the Isthmus "
               "database did not answer: %(reason)s); nothing was deleted, try again")


def _record_delete(resource: str, resource_id: str, project_id: str | None) -> None:
    """The delete's tombstone, written before the delete commits (precommit)."""
    try:
        state().tombstones.bury(resource, resource_id, project_id, attempts=2)
    except Exception as err:  # any database error, a missing table, a bad URL: no record, no delete
        LOG.error("isthmus: refusing the delete of %s %s: its tombstone could not be written: %s",
                  resource, resource_id, err)
        raise DeleteNotRecorded(resource=resource, id=resource_id, reason=type(err).__name__) from err


def _is_compute(port: dict) -> bool:
    owner = port.get("device_owner") or ""
    return owner.startswith("compute:") and owner != SHADOW_OWNER


class CentralMechanismDriver(api.MechanismDriver):
    def initialize(self) -> None:
        for event in (events.AFTER_CREATE, events.AFTER_DELETE):
            registry.subscribe(self._security_group_rule_changed, resources.SECURITY_GROUP_RULE, event)
        for event in (events.AFTER_UPDATE, events.AFTER_DELETE):
            registry.subscribe(self._security_group_changed, resources.SECURITY_GROUP, event)
        registry.subscribe(self._security_group_deleting, resources.SECURITY_GROUP, events.PRECOMMIT_DELETE)
        registry.subscribe(self._router_deleting, resources.ROUTER, events.PRECOMMIT_DELETE)
        # Routers: neutron-lib's callback events of the L3 resources (published
        # by any L3 plugin), so central needs no L3 plugin of its own.
        for resource in (resources.ROUTER, resources.ROUTER_INTERFACE, resources.ROUTER_GATEWAY):
            for event in (events.AFTER_CREATE, events.AFTER_UPDATE, events.AFTER_DELETE):
                registry.subscribe(self._router_changed, resource, event)
        for event in (events.AFTER_CREATE, events.AFTER_UPDATE, events.AFTER_DELETE):
            registry.subscribe(self._floatingip_changed, resources.FLOATING_IP, event)

    # --- binding -------------------------------------------------------------------
    def bind_port(self, context: api.PortContext) -> None:
        report = _report(context.current)
        if not report or not report.get("vif_type"):
            return
        for segment in context.segments_to_bind:
            context.set_binding(segment[api.ID], report["vif_type"], report.get("vif_details") or {},
                                status=constants.PORT_STATUS_ACTIVE)
            return

    # --- subnets: reservations --------------------------------------------------------
    def create_subnet_postcommit(self, context: api.SubnetContext) -> None:
        """Reserve addresses no region may hand out: the DHCP address all regions
        share, and one gateway address per region the network may live in.
        Raising here makes ML2 delete the subnet again (nothing half-made)."""
        subnet = context.current
        if copies.addresses_from_mac(subnet):
            return
        admin = context.plugin_context.elevated()
        plugin = directory.get_plugin()
        if subnet.get("enable_dhcp"):
            self._reserve(plugin, admin, subnet, dhcp_reservation_name(subnet["id"]),
                          DHCP_RESERVATION_DEVICE, constants.DEVICE_OWNER_DHCP)
        # Per-region gateways serve the regions' own routers; an external network's
        # gateway is the upstream one, shared by every region.
        if subnet.get("gateway_ip") and not context.network.current.get("router:external"):
            hints = context.network.current.get("availability_zone_hints") or []
            for region in state().regions_for_hints(list(hints)):
                self._reserve(plugin, admin, subnet, gateway_reservation_name(region, subnet["id"]),
                              GATEWAY_RESERVATION_DEVICE, constants.DEVICE_OWNER_DISTRIBUTED)

    @staticmethod
    def _reserve(plugin, admin, subnet: dict, name: str, device_id: str, owner: str) -> None:
        if plugin.get_ports(admin, filters={"network_id": [subnet["network_id"]], "name": [name]}, fields=["id"]):
            return
        plugin_utils.create_port(plugin, admin, {"port": {
            "network_id": subnet["network_id"], "name": name, "device_id": device_id, "device_owner": owner,
            "project_id": subnet["project_id"], "fixed_ips": [{"subnet_id": subnet["id"]}],
            "admin_state_up": True,
        }}, check_allow_post=False)

    def delete_subnet_precommit(self, context: api.SubnetContext) -> None:
        _record_delete("subnet", context.current["id"], context.current["project_id"])

    def delete_subnet_postcommit(self, context: api.SubnetContext) -> None:
        """The reservations lost their address with the subnet; remove the ports."""
        subnet = context.current
        admin = context.plugin_context.elevated()
        plugin = directory.get_plugin()
        names = {dhcp_reservation_name(subnet["id"])}
        names |= {gateway_reservation_name(p.region_name, subnet["id"]) for p in state().pods()}
        for port in plugin.get_ports(admin, filters={"network_id": [subnet["network_id"]], "name": list(names)}):
            if not port.get("fixed_ips"):
                plugin.delete_port(admin, port["id"])
        state().registry.forget(subnet["id"], "subnet")  # the network's sync removes the copies
        self._sync_network(subnet["network_id"], subnet["project_id"], "subnet deleted")

    def update_subnet_postcommit(self, context: api.SubnetContext) -> None:
        subnet, before = context.current, context.original or {}
        if (subnet.get("enable_dhcp") and not before.get("enable_dhcp")
                and not copies.addresses_from_mac(subnet)):
            # DHCP turned on later: the shared DHCP address must be central's
            # before any region's DHCP port takes one (the regions copy it).
            self._reserve(directory.get_plugin(), context.plugin_context.elevated(), subnet,
                          dhcp_reservation_name(subnet["id"]), DHCP_RESERVATION_DEVICE, constants.DEVICE_OWNER_DHCP)
        self._sync_network(context.current["network_id"], context.current["project_id"], "subnet updated")

    # --- networks ----------------------------------------------------------------
    def update_network_postcommit(self, context: api.NetworkContext) -> None:
        self._sync_network(context.current["id"], context.current["project_id"], "network updated")

    def delete_network_precommit(self, context: api.NetworkContext) -> None:
        _record_delete("network", context.current["id"], context.current["project_id"])

    def delete_network_postcommit(self, context: api.NetworkContext) -> None:
        self._sync_network(context.current["id"], context.current["project_id"], "network deleted")

    # --- ports -------------------------------------------------------------------
    # Every port event queues port_sync for that port only (constant work per
    # event); network_sync runs when a region first holds a port of the network
    # (it then needs shadows of all the others) and as the periodic backstop.
    def update_port_postcommit(self, context: api.PortContext) -> None:
        port, before = context.current, context.original or {}
        if port.get("device_owner") == constants.DEVICE_OWNER_FLOATINGIP:
            self._floatingip_status_reported(context.plugin_context.elevated(), port)
            return
        if not _is_user_port(port):
            return
        moved = _is_compute(port) or _is_compute(before)
        moved = moved and (port.get(portbindings.HOST_ID) != before.get(portbindings.HOST_ID)
                           or _report(port) != _report(before))
        first_here = self._record_placement(port, before) if moved else False
        copy_changed = bool(copies.port_changes(port, before))
        if moved or copy_changed:
            self._sync_port(port, before, _first_bind_region(port, before, copy_changed))
        if first_here:
            self._sync_network(port["network_id"], port["project_id"], "first port of the network bound there")
        if moved:
            self._sync_routers_of(context.plugin_context.elevated(), port, first_here)
        self._sync_members(port, before)  # queues nothing unless membership changed

    def delete_port_precommit(self, context: api.PortContext) -> None:
        _record_delete("port", context.current["id"], context.current["project_id"])

    def delete_port_postcommit(self, context: api.PortContext) -> None:
        port = context.current
        state().registry.forget(port["id"], "port")
        # Also a user port that is not bound anywhere (a server's port Nova left
        # unbound, or one never booted): regions may still hold copies of it.
        if _is_user_port(port):
            self._sync_port(port, port)
            self._sync_members(None, port)

    def _sync_port(self, port: dict, before: dict, fresh_bind_in: str | None = None) -> None:
        """The port's copies and shadows must show this change (port_sync, this
        port only). New groups are routed to the port's region first, so the
        group sync that follows covers them there. ``fresh_bind_in``: the region of
        the port's first bind, port_sync's hint that nothing is to do there."""
        pod = state().pod_of_region((_report(port) or {}).get("region") or "")
        if pod is not None:
            for sg in set(port.get("security_groups") or []) - set(before.get("security_groups") or []):
                state().registry.ensure_routing(sg, sg, pod.pod_id, port["project_id"], "security_group")
        LOG.debug("isthmus: queue %s %s", jobtypes.PORT_SYNC, port["id"])
        state().jobs.enqueue(jobtypes.PORT_SYNC, port["id"], project_id=port["project_id"] or None,
                             payload=jobtypes.port_sync_payload(port["network_id"], port.get("mac_address"),
                                                                before.get("mac_address"),
                                                                fresh_bind_in=fresh_bind_in))

    def _record_placement(self, port: dict, before: dict) -> bool:
        """Routings say where a central object has copies; reconcilers read them.
        True when this is the first port of its network bound in that region."""
        registry_ = state().registry
        report = _report(port)
        old = _report(before)
        if old and (not report or old["region"] != report["region"]):
            pod = state().pod_of_region(old["region"])
            if pod:
                registry_.forget(port["id"], "port", pod.pod_id)
        if not report or not port.get(portbindings.HOST_ID):
            return False
        pod = state().pod_of_region(report["region"])
        if pod is None:
            LOG.warning("isthmus: port %s reported bound in unknown region %s", port["id"], report["region"])
            return False
        project = port["project_id"]
        first_here = registry_.find_routing(port["network_id"], pod.pod_id, "network") is None
        registry_.ensure_routing(port["id"], port["id"], pod.pod_id, project, "port")
        registry_.ensure_routing(port["network_id"], port["network_id"], pod.pod_id, project, "network")
        for ip in port.get("fixed_ips") or []:
            registry_.ensure_routing(ip["subnet_id"], ip["subnet_id"], pod.pod_id, project, "subnet")
        for sg in port.get("security_groups") or []:
            registry_.ensure_routing(sg, sg, pod.pod_id, project, "security_group")
        return first_here

    # --- security groups ----------------------------------------------------------
    def _security_group_rule_changed(self, resource, event, trigger, payload) -> None:
        # The group's owner, not the rule's or the caller's: an admin adding or
        # removing a rule in another project's group changes that project's copies.
        # AFTER_DELETE carries no rule, only the group id in its metadata.
        rule = payload.latest_state or (payload.states[0] if payload.states else {}) or {}
        group_id = rule.get("security_group_id") or (payload.metadata or {}).get("security_group_id")
        project = self._group_project(payload.context, group_id) or rule.get("project_id") \
            or payload.context.project_id
        self._sync_security_groups(project, f"rule {event}")

    @staticmethod
    def _group_project(context, group_id: str | None) -> str | None:
        if not group_id:
            return None
        try:
            group = directory.get_plugin().get_security_group(context.elevated(), group_id, fields=["project_id"])
        except Exception:  # noqa: BLE001 - deleted meanwhile: its own AFTER_DELETE syncs
            return None
        return group.get("project_id")

    def _security_group_changed(self, resource, event, trigger, payload) -> None:
        group = payload.latest_state or (payload.states[0] if payload.states else {}) or {}
        project = group.get("project_id") or payload.context.project_id
        self._sync_security_groups(project, f"group {event}")

    @staticmethod
    def _security_group_deleting(resource, event, trigger, payload) -> None:
        group = payload.latest_state or (payload.states[0] if payload.states else {}) or {}
        group_id = group.get("id") or payload.resource_id
        if group_id:
            _record_delete("security_group", group_id, group.get("project_id") or payload.context.project_id)

    # --- routers -----------------------------------------------------------------
    def _router_changed(self, resource, event, trigger, payload) -> None:
        router = payload.latest_state or (payload.states[0] if payload.states else {}) or {}
        router_id = payload.resource_id or router.get("id")
        if not router_id:
            return
        project = router.get("project_id") or router.get("tenant_id") or payload.context.project_id
        self._sync_router(router_id, project, f"{resource} {event}")

    @staticmethod
    def _router_deleting(resource, event, trigger, payload) -> None:
        # The L3 plugin's PRECOMMIT_DELETE carries its database row, not a dict.
        router = payload.states[0] if payload.states else None
        router_id = payload.resource_id or getattr(router, "id", None)
        if router_id:
            _record_delete("router", router_id, getattr(router, "project_id", None) or payload.context.project_id)

    def _floatingip_changed(self, resource, event, trigger, payload) -> None:
        """The floating IP's router before and after: one loses it, one gains it."""
        for fip in payload.states or ():
            if isinstance(fip, dict) and fip.get("router_id"):
                self._sync_router(fip["router_id"], fip.get("project_id"), f"floating IP {event}")
        latest = payload.latest_state
        if (event == events.AFTER_UPDATE and isinstance(latest, dict) and not latest.get("port_id")
                and latest.get("status") != constants.FLOATINGIP_STATUS_DOWN):
            # Disassociated: nothing carries it any more (what an L3 agent reports).
            set_floatingip_status(payload.context.elevated(), latest["id"], constants.FLOATINGIP_STATUS_DOWN)

    @staticmethod
    def _floatingip_status_reported(admin, port: dict) -> None:
        """router_sync reports the status of the floating IP's counterpart in the
        external network's region on the floating IP's own port."""
        status = (binding_report(port) or {}).get("floatingip_status")
        if status in (constants.FLOATINGIP_STATUS_ACTIVE, constants.FLOATINGIP_STATUS_DOWN,
                      constants.FLOATINGIP_STATUS_ERROR) and port.get("device_id"):
            set_floatingip_status(admin, port["device_id"], status)

    def _sync_routers_of(self, admin, port: dict, first_here: bool) -> None:
        """A port bound, moved or unbound: the routers of its floating IPs (the
        regional floating IP follows the port) and, when its network is new in
        that region, every router on the network (a half joins there)."""
        l3 = directory.get_plugin(plugin_constants.L3)
        if l3 is None:
            return
        routers = {f["router_id"] for f in l3.get_floatingips(admin, filters={"port_id": [port["id"]]},
                                                              fields=["router_id"]) if f.get("router_id")}
        if first_here:
            interfaces = directory.get_plugin().get_ports(admin, filters={
                "network_id": [port["network_id"]], "device_owner": [constants.DEVICE_OWNER_ROUTER_INTF]},
                fields=["device_id"])
            routers |= {p["device_id"] for p in interfaces if p.get("device_id")}
        for router_id in sorted(routers):
            self._sync_router(router_id, port["project_id"], f"port {port['id']} moved")

    @staticmethod
    def _sync_router(router_id: str, project_id: str | None, why: str) -> None:
        LOG.debug("isthmus: queue %s %s (%s)", jobtypes.ROUTER_SYNC, router_id, why)
        state().jobs.enqueue(jobtypes.ROUTER_SYNC, router_id, project_id=project_id or None)

    # --- job queue ---------------------------------------------------------------
    @staticmethod
    def _sync_network(network_id: str, project_id: str, why: str) -> None:
        LOG.debug("isthmus: queue %s %s (%s)", jobtypes.NETWORK_SYNC, network_id, why)
        state().jobs.enqueue(jobtypes.NETWORK_SYNC, network_id, project_id=project_id or None)

    @staticmethod
    def _sync_members(port: dict | None, before: dict | None) -> None:
        """A port event: one sg_member_sync per (group, address) pair whose
        membership it may have changed (not the whole project: no rule changes)."""
        project_id = (port or before or {}).get("project_id") or None
        for group_id, address in sorted(members.member_pairs(port, before)):
            key = members.member_key(group_id, address)
            LOG.debug("isthmus: queue %s %s", jobtypes.SG_MEMBER_SYNC, key)
            state().jobs.enqueue(jobtypes.SG_MEMBER_SYNC, key, project_id=project_id)

    @staticmethod
    def _sync_security_groups(project_id: str | None, why: str) -> None:
        if not project_id:
            return
        LOG.debug("isthmus: queue %s %s (%s)", jobtypes.SECURITY_GROUP_SYNC, project_id, why)
        state().jobs.enqueue(jobtypes.SECURITY_GROUP_SYNC, project_id, project_id=project_id)
