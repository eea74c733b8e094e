"""Local plugin: a regional neutron-server's core plugin, ML2 plus on-demand copies.

Why a core-plugin subclass and not an ML2 driver: a regional Neutron must answer
for objects it has never seen (Nova asks for a central network by id) and must
let central allocate port addresses *before* its own IPAM runs. ML2 mechanism
drivers see neither. So this class overrides only public plugin-API methods
(the ones neutron-lib's plugin interface defines), each for one stated reason,
and reaches central only through its REST API (:mod:`central`). Everything
else is ML2, untouched.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from typing import Any

import webob.exc
from neutron.plugins.ml2 import plugin as ml2_plugin
from neutron_lib import constants
from neutron_lib import exceptions as n_exc
from neutron_lib.api import validators
from neutron_lib.api.definitions import portbindings
from neutron_lib.plugins import utils as plugin_utils
from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_utils import excutils

from isthmus.network import (
    DHCP_RESERVATION_DEVICE,
    GATEWAY_RESERVATION_DEVICE,
    SHADOW_OWNER,
    TRANSIT_OWNER,
    TRANSIT_TAG,
    binding_report,
    bound_region,
    config,
    copies,
    dhcp_reservation_name,
    gateway_reservation_name,
    port_report,
    reported_agent,
    shadow_port_id,
)
from isthmus.network.local.central import CentralRejected, CentralUnavailable, client
from isthmus.network.local.journal import DeleteJournal
from isthmus.network.local.reports import CentralReports

LOG = logging.getLogger(__name__)
REGIONAL_ONLY_SECONDS = 60.0
# In a shadow agent's configurations: the region whose host it stands for.
_SHADOW_AGENT_MARK = "isthmus_shadow_of"


def _unavailable(err: Exception) -> n_exc.ServiceUnavailable:
    LOG.warning("isthmus: %s", err)
    return n_exc.ServiceUnavailable()


class ExpiringSet:
    """Members forgotten ``ttl`` seconds after they were added (thread-safe)."""

    def __init__(self, ttl: float, clock=time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, item: str) -> None:
        with self._lock:
            self._until[item] = self.clock() + self.ttl

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, str):  # only strings are ever added
            return False
        with self._lock:
            until = self._until.get(item)
            if until is None:
                return False
            if until < self.clock():
                del self._until[item]
                return False
            return True


class CentralConflict(n_exc.Conflict):
    message = "central Neutron refused: %(reason)s"


class SegmentTaken(n_exc.Conflict):
    message = ("network %(network_id)s cannot be copied to %(region)s: its segment %(segment)s is taken "
               "there by a network of that region only (%(reason)s). Give the region's Neutron a tenant "
               "segment range central does not use ([ml2_type_vxlan] vni_ranges / [ml2_type_vlan] "
               "network_vlan_ranges)")


class IpAddressAlreadyAllocated(n_exc.Conflict):
    # Neutron's own (neutron.ipam.exceptions) is internal: this one has its name,
    # so API clients see the error type a plain region answers with.
    message = "IP address %(ip)s already allocated in subnet %(subnet_id)s"


class CentralNotFound(n_exc.NotFound):
    message = "%(reason)s"


def _rejected(err: CentralRejected, resource: str) -> Exception:
    """Central's 4xx, passed on with its status and message (the user's input was wrong)."""
    if err.status == 409:
        return CentralConflict(reason=str(err))
    if err.status == 404:
        return CentralNotFound(reason=str(err))
    return n_exc.BadRequest(resource=resource, msg=f"central Neutron: {err}")


def _is_central_port(device_owner: str | None) -> bool:
    """User and compute ports are allocated at central; network-owned ports
    (DHCP, router interfaces) and shadow copies are regional only."""
    owner = device_owner or ""
    return not owner.startswith("network:") and owner != SHADOW_OWNER


def copy_could_match(filters: dict) -> bool:
    """Whether a port list by id could be answered by copying a missing port from
    central: not when it asks only for owners no copy has (shadows, DHCP, router
    ports). Such a list (a watcher polling for shadows) would otherwise cost one
    central read per id missing here, on every poll, for nothing."""
    owners = filters.get("device_owner")
    return not owners or any(_is_central_port(owner) for owner in owners)


class LocalPlugin(ml2_plugin.Ml2Plugin):
    # Neutron's API layer reads these per concrete class (name-mangled), so a
    # subclass restates ML2's. No native bulk: see create_port_bulk.
    __native_bulk_support = False
    __native_pagination_support = True
    __native_sorting_support = True

    # Copying a network takes several commits (network, then subnets). While one
    # is in progress (its id in _copying) readers of that id wait on its stripe
    # lock, so they never see a network without its subnets (Nova refuses to boot
    # on one). Everyone else takes the lock-free path: a thread inside a database
    # transaction must never wait on a stripe (the copier may be waiting for the
    # database). Reentrant: copying a subnet reads the network again.
    _STRIPES = 64

    def __init__(self) -> None:
        config.register()
        self._stripes = [threading.RLock() for _ in range(self._STRIPES)]
        self._copying: set[str] = set()
        # Networks central answered it does not know (made in this region only),
        # remembered for a while, not forever: one 404 (a restore, a misrouted
        # request) must not make a central network regional for good.
        self._regional_only = ExpiringSet(REGIONAL_ONLY_SECONDS)
        super().__init__()
        self.region = cfg.CONF.isthmus.region_name
        self.availability_zone = cfg.CONF.isthmus.availability_zone
        self.reports = CentralReports(self.region, self._current_report, client,
                                      journal=DeleteJournal(cfg.CONF.isthmus.delete_journal_dir))
        self.reports.resume()
        LOG.info("isthmus local plugin for region %s (az %s)", self.region, self.availability_zone)

    def _stripe(self, object_id: str) -> threading.RLock:
        return self._stripes[zlib.crc32(str(object_id).encode("utf-8", "surrogatepass")) % self._STRIPES]

    # ------------------------------------------------------------------ networks
    # Override: answer for a central network this region has not copied yet.
    def get_network(self, context, id, fields=None, net_db=None):
        if not isinstance(id, str) or not id:
            # No id at all (PUT or DELETE on /networks reaches here with None):
            # nothing central could have; ML2 answers as for stock Neutron.
            return super().get_network(context, id, fields, net_db)
        if id not in self._copying:
            try:
                return super().get_network(context, id, fields, net_db)
            except n_exc.NetworkNotFound:
                pass
        with self._stripe(id):
            try:
                return super().get_network(context, id, fields, net_db)
            except n_exc.NetworkNotFound:
                if not self._copy_network(context, id):
                    raise
                return super().get_network(context, id, fields)

    # Override: Nova validates --nic net-id with a list filtered by id; clients
    # (openstack server create --network NAME) look a network up by name.
    def get_networks(self, context, filters=None, fields=None, sorts=None, limit=None, marker=None,
                     page_reverse=False):
        if filters and filters.get("name") and not filters.get("id"):
            self._copy_named_networks(context, filters["name"])
        if filters and filters.get("id"):
            admin = context.elevated()
            local = {n["id"] for n in super().get_networks(admin, filters={"id": filters["id"]}, fields=["id"])}
            for network_id in sorted(set(filters["id"])):
                if network_id in local and network_id not in self._copying:
                    continue
                with self._stripe(network_id):
                    if not super().get_networks(admin, filters={"id": [network_id]}, fields=["id"]):
                        self._copy_network(context, network_id)
        return super().get_networks(context, filters, fields, sorts, limit, marker, page_reverse)

    def _copy_named_networks(self, context, names: list[str]) -> None:
        """Copy central networks of these names that the caller may use here."""
        try:
            found = [n for name in names for n in client().neutron.list("networks", name=name)]
        except CentralUnavailable as err:
            # What is copied already keeps working while central is down: answer
            # from the copies here (a network not copied yet is not found by name).
            LOG.warning("isthmus: central unreachable, networks named %s answered from this region: %s",
                        names, err)
            return
        for network in found:
            if not self._visible(context, network):
                continue
            local = super().get_networks(context.elevated(), filters={"id": [network["id"]]}, fields=["id"])
            if not local:
                with self._stripe(network["id"]):
                    self._copy_network(context, network["id"])

    def _copy_network(self, context, network_id: str) -> bool:
        """Copy a central network (and its subnets) here; False if central has
        none this caller may see, or it is not meant for this region."""
        try:
            central = client().network(network_id)
        except CentralUnavailable as err:
            raise _unavailable(err) from err
        if central is None or not self._visible(context, central):
            return False
        if not copies.allowed_here(central, self.region, self.availability_zone):
            LOG.info("isthmus: network %s is not hinted to %s; not copying", network_id, self.region)
            return False
        admin = context.elevated()
        self._copying.add(network_id)
        try:
            try:
                plugin_utils.create_network(self, admin, {"network": copies.network_body(central)},
                                            check_allow_post=False)
                LOG.info("isthmus: copied network %s from central", network_id)
            except (db_exc.DBDuplicateEntry, n_exc.Conflict):
                pass  # another process copied it first
            except (n_exc.TunnelIdInUse, n_exc.VlanIdInUse) as err:
                raise SegmentTaken(network_id=network_id, region=self.region, segment=_segment(central),
                                   reason=str(err)) from err
            for subnet in self._central_subnets(network_id):
                self._copy_subnet(admin, subnet)
        finally:
            self._copying.discard(network_id)
        return True

    @staticmethod
    def _visible(context, central: dict[str, Any]) -> bool:
        return bool(context.is_admin or central.get("shared") or central.get("project_id") == context.project_id)

    # ------------------------------------------------------------------- subnets
    # Override: a subnet id Nova or a user names before its network was copied.
    def get_subnet(self, context, id, fields=None):
        try:
            return super().get_subnet(context, id, fields)
        except n_exc.SubnetNotFound:
            if not self._copy_subnet_by_id(context, id):
                raise
            return super().get_subnet(context, id, fields)

    def get_subnets(self, context, filters=None, fields=None, sorts=None, limit=None, marker=None,
                    page_reverse=False):
        if filters and filters.get("id"):
            self._copy_missing(context, filters["id"], super().get_subnets, self._copy_subnet_by_id)
        return super().get_subnets(context, filters, fields, sorts, limit, marker, page_reverse)

    @staticmethod
    def _copy_missing(context, ids, list_local, copy) -> None:
        """Copy the objects among ``ids`` this region does not have yet."""
        local = {o["id"] for o in list_local(context.elevated(), filters={"id": ids}, fields=["id"])}
        for object_id in sorted(set(ids) - local):
            copy(context, object_id)

    def _copy_subnet_by_id(self, context, subnet_id: str) -> bool:
        try:
            central = client().subnet(subnet_id)
        except CentralUnavailable as err:
            raise _unavailable(err) from err
        if central is None:
            return False
        try:
            self.get_network(context, central["network_id"], fields=["id"])
        except n_exc.NetworkNotFound:
            return False
        self._copy_subnet(context.elevated(), central)
        return True

    # Override: DHCP turned on for a copied subnet (network_sync follows central)
    # takes central's reserved DHCP address here first, so this region's DHCP
    # port can never take an address central hands to a VM.
    def update_subnet(self, context, id, subnet):
        body = subnet.get("subnet") or {}
        if body.get("enable_dhcp") is True:
            admin = context.elevated()
            current = super().get_subnet(admin, id)
            if not current.get("enable_dhcp") and not copies.addresses_from_mac(current):
                self._copy_dhcp_reservation(admin, current)
        return super().update_subnet(context, id, subnet)

    def _copy_dhcp_reservation(self, admin, subnet: dict) -> None:
        if subnet["network_id"] in self._regional_only:
            return
        try:
            central = client().subnet(subnet["id"])
        except CentralUnavailable as err:
            raise _unavailable(err) from err
        if central is None:
            return  # a subnet of this region only
        dhcp = self._central_reservation(central, dhcp_reservation_name(central["id"]),
                                         DHCP_RESERVATION_DEVICE, constants.DEVICE_OWNER_DHCP)
        self._copy_port_body(admin, dhcp)

    def _central_subnets(self, network_id: str) -> list[dict]:
        try:
            return client().subnets(network_id)
        except CentralUnavailable as err:
            raise _unavailable(err) from err

    def _copy_subnet(self, admin, central: dict[str, Any]) -> None:
        """Same UUID and CIDR; this region's own gateway address (reserved at
        central so no region hands it out); the shared DHCP address."""
        try:
            super().get_subnet(admin, central["id"], fields=["id"])
            return
        except n_exc.SubnetNotFound:
            pass
        auto_address = copies.addresses_from_mac(central)
        # An external network's gateway is the upstream router, the same for every region.
        external = super().get_network(admin, central["network_id"], fields=["router:external"]).get(
            "router:external")
        gateway = None
        if central.get("gateway_ip") and not auto_address and not external:
            gateway = self._central_reservation(central, gateway_reservation_name(self.region, central["id"]),
                                                GATEWAY_RESERVATION_DEVICE, constants.DEVICE_OWNER_DISTRIBUTED)
        body = copies.subnet_body(central, gateway["fixed_ips"][0]["ip_address"] if gateway else None)
        try:
            plugin_utils.create_subnet(self, admin, {"subnet": body}, check_allow_post=False)
            LOG.info("isthmus: copied subnet %s (%s) from central", central["id"], central["cidr"])
        except (db_exc.DBDuplicateEntry, n_exc.Conflict):
            return
        if central.get("enable_dhcp") and not auto_address:
            dhcp = self._central_reservation(central, dhcp_reservation_name(central["id"]),
                                             DHCP_RESERVATION_DEVICE, constants.DEVICE_OWNER_DHCP)
            self._copy_port_body(admin, dhcp)

    def _central_reservation(self, subnet: dict, name: str, device_id: str, owner: str) -> dict:
        """Find, or create at central, a reserved address on ``subnet``.

        Central creates them with the subnet; this covers regions added later.
        Two regions racing may both create one: the lowest id wins, the other
        is removed, so every caller ends with the same port."""
        central = client()
        try:
            found = central.ports(network_id=subnet["network_id"], name=name)
            if not found:
                central.create_port({
                    "network_id": subnet["network_id"], "name": name, "device_id": device_id,
                    "device_owner": owner, "project_id": subnet["project_id"],
                    "fixed_ips": [{"subnet_id": subnet["id"]}],
                })
                found = central.ports(network_id=subnet["network_id"], name=name)
            found.sort(key=lambda p: p["id"])
            for extra in found[1:]:
                central.delete_port(extra["id"])
            return found[0]
        except CentralUnavailable as err:
            raise _unavailable(err) from err
        except CentralRejected as err:
            raise _rejected(err, "subnet") from err

    # --------------------------------------------------------------------- ports
    # Override: user and compute ports get their UUID, MAC and IPs from central.
    def create_port(self, context, port):
        attrs = port["port"]
        if _is_shadow(attrs):
            self._prepare_shadow(context, attrs)
            return super().create_port(context, port)
        if not _is_central_port(attrs.get("device_owner")):
            return super().create_port(context, port)
        self.get_network(context, attrs["network_id"], fields=["id"])  # copy it if needed
        allocated = self._allocate_at_central(context, attrs)
        if allocated is None:  # a network of this region only: nothing to share
            return super().create_port(context, port)
        central_port, created = allocated
        admin = context.elevated()
        for sg_id in central_port.get("security_groups") or []:
            self._ensure_security_group(admin, sg_id)
        attrs.update(self._port_fields(admin, copies.port_body(central_port, attrs)))
        try:
            made = super().create_port(context, port)
        except Exception:
            if created:
                self._forget_central_port(central_port["id"])
            raise
        if made.get(portbindings.HOST_ID):  # created bound (not Nova's way, but allowed): report it
            self.reports.report(made["id"])
        return made

    # Override: ML2's bulk create skips create_port, so every port of a bulk POST
    # would take its addresses here instead of at central. One at a time, as
    # Neutron's emulated bulk does; the ones made are undone if one fails.
    # Shadows (the job worker makes a burst's in one POST) take nothing from
    # central: they keep ML2's own bulk create, one transaction for them all. Only
    # the plugin API's create_port_bulk is used, the surface Neutron's bulk POST
    # itself calls.
    def create_port_bulk(self, context, ports):
        items = ports["ports"]
        if items and all(_is_shadow(item["port"]) for item in items):
            for item in items:
                self._prepare_shadow(context, item["port"])
            return super().create_port_bulk(context, ports)
        made: list[dict] = []
        try:
            for item in ports["ports"]:
                made.append(self.create_port(context, item))
        except Exception:
            with excutils.save_and_reraise_exception():
                for port in made:
                    try:
                        self.delete_port(context, port["id"])
                    except Exception:  # noqa: BLE001 - the original error is the one to report
                        LOG.exception("isthmus: could not undo port %s of a failed bulk create", port["id"])
        return made

    def _prepare_shadow(self, context, attrs: dict) -> None:
        """A shadow's create made ready: its UUID, its remote agent, and the
        security groups it carries (copied from central if this region has none
        yet: Neutron refuses a port naming a group it does not have)."""
        attrs["id"] = shadow_port_id(attrs.get("name"))  # a copy of a port of another region keeps its UUID
        admin = context.elevated()
        self._ensure_shadow_agent(admin, attrs)
        groups = attrs.get("security_groups")
        for sg_id in groups if validators.is_attr_set(groups) and groups else []:
            self._ensure_security_group(admin, sg_id)

    def _allocate_at_central(self, context, attrs: dict) -> tuple[dict, bool] | None:
        """(central port, whether we created it); None for a network central does
        not know (created in this region only). An explicit fixed IP that central
        holds is reused only when it is the caller's own free port (Nova's "boot on
        a pre-created port"); another's is a 409, as in a plain region: copying it
        would give the caller another project's UUID, MAC and port to delete."""
        if attrs["network_id"] in self._regional_only:
            return None
        central = client()
        explicit = [ip for ip in attrs.get("fixed_ips") or [] if isinstance(ip, dict) and ip.get("ip_address")] \
            if validators.is_attr_set(attrs.get("fixed_ips")) else []
        project_id = attrs.get("project_id") or attrs.get("tenant_id") or context.project_id
        try:
            if explicit:
                address = explicit[0]["ip_address"]
                held = central.ports(network_id=attrs["network_id"], fixed_ips=f"ip_address={address}")
                if held:
                    # A copy of this very port (its id is central's: only the plugin's own
                    # copies carry an id) takes it; a user's create only its own free port.
                    if held[0]["id"] != attrs.get("id") and not copies.reusable_by(held[0], project_id):
                        raise IpAddressAlreadyAllocated(ip=address, subnet_id=_subnet_of(held[0], address))
                    return held[0], False
            return central.create_port(copies.central_port_request(attrs, project_id)), True
        except CentralUnavailable as err:
            raise _unavailable(err) from err
        except CentralRejected as err:
            # 403 too: central checks device_owner policy against a network it does not have.
            if err.status in (403, 404) and client().network(attrs["network_id"]) is None:
                self._regional_only.add(attrs["network_id"])
                return None
            raise _rejected(err, "port") from err

    def _port_fields(self, admin, body: dict) -> dict:
        """Drop explicit addresses on MAC-derived IPv6 subnets (same MAC, same address)."""
        fixed = []
        for ip in body.get("fixed_ips", []):
            subnet = super().get_subnet(admin, ip["subnet_id"], fields=["ipv6_address_mode"])
            fixed.append({"subnet_id": ip["subnet_id"]} if copies.addresses_from_mac(subnet) else ip)
        body["fixed_ips"] = fixed
        return body

    def _copy_port_body(self, admin, central: dict) -> None:
        try:
            super().get_port(admin, central["id"])
            return
        except n_exc.PortNotFound:
            pass
        body = self._port_fields(admin, copies.port_body(central))
        try:
            plugin_utils.create_port(self, admin, {"port": body}, check_allow_post=False)
        except (db_exc.DBDuplicateEntry, n_exc.MacAddressInUse, n_exc.IpAddressInUse):
            LOG.info("isthmus: port %s copied concurrently", central["id"])

    # Override: --nic port-id=P names a central port this region has not copied,
    # or a shadow here of a port that has just left the region it was bound in.
    def get_port(self, context, id, fields=None):
        try:
            port = super().get_port(context, id, fields)
        except n_exc.PortNotFound:
            if not self._copy_port(context, id):
                raise
            return super().get_port(context, id, fields)
        whole = port if fields is None else None
        if not self._by_isthmus(context) and self._replace_stale_shadow(context, id, whole):
            return super().get_port(context, id, fields)
        return port

    def _replace_stale_shadow(self, context, port_id: str, here: dict | None) -> bool:
        """A user asks for a port that is a shadow here (Nova, before it binds a
        server to it): when central, read now, says the port is bound nowhere else,
        the shadow is stale (port_sync removes it within seconds) and Nova would
        refuse the boot as "port still in use". It becomes the port's copy at once.
        Proof only: central unreachable or the port still bound elsewhere keeps it."""
        admin = context.elevated()
        here = here or super().get_port(admin, port_id)
        if not _is_shadow(here):
            return False
        try:
            central = client().port(port_id)
        except CentralUnavailable:
            return False
        if central is None or _bound_elsewhere(central, self.region):
            return False
        LOG.info("isthmus: shadow %s is stale (central: bound nowhere else); copying the port instead", port_id)
        try:
            super().delete_port(admin, port_id)
        except n_exc.PortNotFound:
            pass  # port_sync removed it meanwhile
        return self._copy_port(context, port_id)

    def get_ports(self, context, filters=None, fields=None, sorts=None, limit=None, marker=None,
                  page_reverse=False):
        if filters and filters.get("id") and copy_could_match(filters):
            self._copy_missing(context, filters["id"], super().get_ports, self._copy_port)
        return super().get_ports(context, filters, fields, sorts, limit, marker, page_reverse)

    def _copy_port(self, context, port_id: str) -> bool:
        try:
            central = client().port(port_id)
        except CentralUnavailable as err:
            raise _unavailable(err) from err
        if central is None or not self._visible(context, central) or not _is_central_port(central.get("device_owner")):
            return False
        if _bound_elsewhere(central, self.region):
            return False  # it lives in another region; its copy here is a shadow, made by the reconciler
        try:
            self.get_network(context, central["network_id"], fields=["id"])
        except n_exc.NetworkNotFound:
            return False
        admin = context.elevated()
        for sg_id in central.get("security_groups") or []:
            self._ensure_security_group(admin, sg_id)
        self._copy_port_body(admin, central)
        return True

    # Override: report where Nova bound a port, so central (and the other
    # regions, through reconcile jobs) know the port lives here.
    def update_port(self, context, id, port):
        self.reports.resume()
        before = super().get_port(context.elevated(), id)
        after = super().update_port(context, id, port)
        if (self._central_owner(context.elevated(), after) is not None and _binding_moved(before, after)
                and after["network_id"] not in self._regional_only):
            self.reports.report(after["id"])  # from the background, retried until central has it
        return after

    def _central_owner(self, admin, port: dict) -> str | None:
        """The device_owner central knows this port by (None: a regional-only port).
        A router interface on a transit network is a router half's transit port,
        which central allocated: its binding is reported at once, as a server's
        is, so the other regions shadow it within seconds of the L3 agent binding
        it (router_sync's periodic pass stays the backstop)."""
        owner = port.get("device_owner") or ""
        if _is_central_port(owner):
            return owner
        if owner == constants.DEVICE_OWNER_ROUTER_INTF:
            network = super().get_network(admin, port["network_id"], fields=["description"])
            if (network.get("description") or "").startswith(TRANSIT_TAG):
                return TRANSIT_OWNER
        return None

    def _current_report(self, port_id: str) -> dict | None:
        """What central should know of this port's binding here, as it is now
        (None: not a port of central's, or gone)."""
        from neutron_lib import context as n_context

        admin = n_context.get_admin_context()
        try:
            port = super().get_port(admin, port_id)
        except n_exc.PortNotFound:
            return None
        owner = self._central_owner(admin, port)
        if owner is None or port["network_id"] in self._regional_only:
            return None
        host = port.get(portbindings.HOST_ID) or ""
        report = port_report(self.region, port, self._tunnel_agent(admin, host) if host else None)
        report["device_owner"] = owner  # a transit port stays one at central (regions shadow those)
        return report

    # ------------------------------------------------------------ L2 agents
    # The agents API (get_agents, create_or_update_agent) is the public plugin
    # interface agents themselves report through; nothing below it is touched.
    def _tunnel_agent(self, admin, host: str) -> dict[str, str] | None:
        """This region's OVS agent on ``host`` and its VxLAN endpoint, for the
        other regions' shadow agents (None: no agent with a tunnel there)."""
        try:
            agents = self.get_agents(admin, filters={
                "host": [host], "agent_type": [constants.AGENT_TYPE_OVS]})
        except Exception as err:  # noqa: BLE001 - a report without it still binds central
            LOG.warning("isthmus: agents of host %s unreadable: %s", host, err)
            return None
        for agent in agents:
            tunnel_ip = (agent.get("configurations") or {}).get("tunneling_ip")
            if tunnel_ip and not _is_shadow_agent(agent):
                return {"type": agent["agent_type"], "host": host, "tunnel_ip": tunnel_ip}
        return None

    def _ensure_shadow_agent(self, admin, attrs: dict) -> None:
        """A shadow port is bound to a host of another region. Give that host an
        agent row here (type and tunnel IP of the real one there), as its agent
        would report it: ML2 binds the port to it and l2population builds the
        tunnel to it. A host that runs a real agent here is left alone."""
        agent = reported_agent(attrs)
        if agent is None or agent["type"] != constants.AGENT_TYPE_OVS:
            return
        existing = self.get_agents(admin, filters={"host": [agent["host"]], "agent_type": [agent["type"]]})
        if any(not _is_shadow_agent(a) for a in existing):
            return
        self.create_or_update_agent(admin, {
            "agent_type": agent["type"], "binary": "neutron-openvswitch-agent", "host": agent["host"],
            "topic": "N/A", "start_flag": not existing,
            "configurations": {"tunneling_ip": agent["tunnel_ip"], "tunnel_types": ["vxlan"],
                               "l2_population": True,
                               _SHADOW_AGENT_MARK: (binding_report(attrs) or {}).get("region") or True},
        })
        LOG.info("isthmus: shadow agent for host %s (tunnel %s)", agent["host"], agent["tunnel_ip"])

    # Override: a user or compute port deleted in the region where it lives (or,
    # unbound, in any region) is deleted at central first; central's fan-out
    # removes the copies elsewhere. A stale copy of a port that now lives in
    # another region (the reconciler removes those) goes only here.
    def delete_port(self, context, id, l3_port_check=True):
        self.reports.resume()
        try:
            port = super().get_port(context.elevated(), id)
        except n_exc.PortNotFound:
            port = None
        tell_central_later = False
        if port and _is_central_port(port.get("device_owner")) and not self._by_isthmus(context):
            _check_revision(context, port)  # before central: a refused delete must not happen there
            try:
                if self._lives_here(port):
                    client().delete_port(id)
            except CentralUnavailable as err:
                # The port goes here now; central is told when it answers again,
                # from the journal, written first: a restart of this server loses
                # no delete (central takes none on absence alone).
                LOG.warning("isthmus: central unreachable; port %s deleted here, at central later: %s", id, err)
                self.reports.will_delete(id)
                tell_central_later = True
            except CentralRejected as err:
                raise _rejected(err, "port") from err
        result = super().delete_port(context, id, l3_port_check)
        if tell_central_later:
            self.reports.deleted_here(id)
        return result

    @staticmethod
    def _by_isthmus(context) -> bool:
        """Isthmus' own job worker deletes copies, never users' ports: whatever it
        read when it planned, its delete stays in this region. Without this, a copy
        planned stale from an old read (bound elsewhere then, unbound by now)
        became a delete of the user's port at central."""
        identity = client().identity
        return identity is not None and identity.is_caller(context)

    def _lives_here(self, port: dict) -> bool:
        # Central's word, not this copy's binding: a region that was down while
        # its server went may still show the port bound here after it moved.
        if port["network_id"] in self._regional_only:
            return False
        central = client().port(port["id"])
        return central is not None and not _bound_elsewhere(central, self.region)

    def _forget_central_port(self, port_id: str) -> None:
        try:
            client().delete_port(port_id)
        except (CentralUnavailable, CentralRejected) as err:
            LOG.error("isthmus: port %s allocated at central but not created here; delete it at central: %s",
                      port_id, err)

    # ------------------------------------------------------------ security groups
    # Override: copy a central security group on first reference.
    def get_security_group(self, context, id, fields=None, tenant_id=None):
        try:
            return super().get_security_group(context, id, fields, tenant_id)
        except n_exc.NotFound:
            if not self._copy_security_group(context, id):
                raise
            return super().get_security_group(context, id, fields, tenant_id)

    # Override: a project's default group in a region *is* central's default
    # group (same UUID); a region never invents its own.
    def create_security_group(self, context, security_group, default_sg=False):
        body = security_group["security_group"]
        if default_sg and not body.get("id"):
            try:
                found = client().security_groups(project_id=body["project_id"], name="default")
            except (CentralUnavailable, CentralRejected) as err:
                raise _unavailable(err) from err
            if found:
                body["id"] = found[0]["id"]
        return super().create_security_group(context, security_group, default_sg)

    def _ensure_security_group(self, admin, sg_id: str) -> None:
        try:
            super().get_security_group(admin, sg_id, fields=["id"])
        except n_exc.NotFound:
            self._copy_security_group(admin, sg_id)

    def _copy_security_group(self, context, sg_id: str) -> bool:
        try:
            central = client().security_group(sg_id)
        except CentralUnavailable as err:
            raise _unavailable(err) from err
        if central is None or not self._visible(context, central):
            return False
        admin = context.elevated()
        body = copies.security_group_body(central)
        made = None
        if central.get("name") == "default":
            made = super().create_security_group(admin, {"security_group": body}, default_sg=True)
        if made is None or made["id"] != sg_id:
            try:
                made = super().create_security_group(admin, {"security_group": body})
            except (db_exc.DBDuplicateEntry, n_exc.Conflict):
                made = super().get_security_group(admin, sg_id)
        have = {copies.rule_key(r) for r in made.get("security_group_rules", [])}
        for rule in central.get("security_group_rules") or []:
            # A rule naming one of central's address groups is not copied (they
            # have no regional copies). Companion rules naming this region's
            # member address groups are the reconciler's, never central's.
            if copies.rule_key(rule) in have or rule.get("remote_address_group_id"):
                continue
            if rule.get("remote_group_id") and rule["remote_group_id"] != sg_id:
                self._ensure_security_group(admin, rule["remote_group_id"])
            try:
                body = copies.rule_body(rule, sg_id, all_keys=True)
                body["project_id"] = central["project_id"]  # the API layer fills it; we are below it
                super().create_security_group_rule(admin, {"security_group_rule": body})
            except n_exc.Conflict:
                pass
        LOG.info("isthmus: copied security group %s from central", sg_id)
        return True


def _is_shadow(attrs: dict) -> bool:
    return bool(shadow_port_id(attrs.get("name"))) and attrs.get("device_owner") == SHADOW_OWNER


def _subnet_of(port: dict, address: str) -> str:
    return next((ip["subnet_id"] for ip in port.get("fixed_ips") or [] if ip.get("ip_address") == address), "")


def _segment(network: dict) -> str:
    return f"{network.get('provider:network_type')}:{network.get('provider:segmentation_id')}"


def _bound_elsewhere(port: dict, region: str) -> bool:
    return bound_region(port) not in (None, region)


def _check_revision(context, port: dict) -> None:
    """The caller's If-Match on this port, checked now. Neutron checks it only in
    the database transaction, after central would already have deleted the port."""
    constraint = context.get_transaction_constraint()
    if constraint is None or constraint.resource != "ports" or constraint.resource_id != port["id"]:
        return
    if constraint.if_revision_match != port.get("revision_number"):
        # What Neutron's revision plugin raises (a 412); its class is internal, webob's is not.
        raise webob.exc.HTTPPreconditionFailed(detail=f"Constrained to {constraint.if_revision_match}, "
                                                      f"but current revision is {port.get('revision_number')}")


def _is_shadow_agent(agent: dict) -> bool:
    return bool((agent.get("configurations") or {}).get(_SHADOW_AGENT_MARK))


def _binding_moved(before: dict, after: dict) -> bool:
    keys = (portbindings.HOST_ID, "device_owner", "device_id", portbindings.VIF_TYPE)
    return any(before.get(k) != after.get(k) for k in keys)
