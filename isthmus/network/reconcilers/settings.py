"""What the reconcilers use: central and regional Neutron clients over one
Keystone session, and the region registry. Built lazily from the worker's
configuration: ``[isthmus] central_region``, ``[isthmus_service]`` (keystoneauth
options of the service user) and ``[database] connection``."""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from oslo_config import cfg

from isthmus.clients import NeutronClient, NovaClient, RegionClients, Unavailable, load_session
from isthmus.clients.neutron import DEFAULT_TIMEOUT
from isthmus.clients.ovsdb import OvsdbClient, TLSFiles
from isthmus.clients.regions import auth_opts, register_auth_opts
from isthmus.db import make_engine
from isthmus.network.reconcilers.address_groups import KnownAddressGroups
from isthmus.network.reconcilers.ovn.region import OvnRegion
from isthmus.registry import Registry, Tombstones, TunnelKeys

LOG = logging.getLogger(__name__)

SERVICE_AUTH_GROUP = "isthmus_service"
OPTS = [
    cfg.StrOpt("central_region", default="CentralRegion", help="The region whose Neutron is central."),
    cfg.FloatOpt("resync_interval", default=60.0,
                 help="Seconds between drift-repair passes over every routed network."),
    cfg.StrOpt("cross_region_l2", default="shadow",
               choices=[("shadow", "VxLAN networks get shadow ports (and shadow agents) of the VM ports "
                                   "bound in other regions, so l2population builds tunnels between regions"),
                        ("noop", "no shadows: the operator provides cross-region L2 some other way")],
               help="How VxLAN networks reach across regions."),
    cfg.StrOpt("transit_cidr", default="100.64.0.0/24",
               help="IPv4 range of every router's transit network (one address per region the router "
                    "reaches). Each router has its own transit network, so routers may share it; a subnet "
                    "attached to a router must not overlap it."),
    cfg.StrOpt("transit_cidr_v6", default="fd00:6973:7468::/64",
               help="IPv6 range of every router's transit network (see transit_cidr)."),
    cfg.FloatOpt("binding_sync_delete_share", default=0.1, min=0.0, max=1.0,
                 help="binding_sync deletes at central a port whose region lost it and whose server Nova no "
                      "longer has. A pass that would delete more than this share of the ports bound in a "
                      "region (or binding_sync_delete_floor, whichever is more) deletes none and fails its "
                      "job instead, naming them: a mass loss is a restore or the wrong Nova far more often "
                      "than a mass delete. 1.0 turns the brake off."),
    cfg.FloatOpt("binding_sync_grace", default=120.0, min=0.0,
                 help="Seconds binding_sync leaves a port changed at central alone when its region "
                      "lacks it (a port moving between regions, a report in flight)."),
    cfg.IntOpt("binding_sync_delete_floor", default=3, min=0,
               help="Deletes a binding_sync pass may always make, however few ports the region has "
                    "(see binding_sync_delete_share)."),
    cfg.FloatOpt("region_timeout", default=DEFAULT_TIMEOUT, min=0.1,
                 help="Seconds each HTTP attempt of the worker's calls to central and regional Neutron "
                      "and to Keystone may take. [isthmus_service] timeout, when set, wins."),
]


# One section per ML2/OVN region, ``[ovn:<region>]``: where the worker reaches its
# OVN databases (docs/ovn.md). A region without one that reports OVN agents gets
# no cross-region L2 (an error in the log), never shadow ports it cannot bind.
OVN_GROUP_PREFIX = "ovn:"
OVN_OPTS = [
    cfg.StrOpt("nb_connection", help="The region's OVN Northbound database (tcp:, ssl: or unix:; a cluster's "
                                     "remotes separated by commas)."),
    cfg.StrOpt("sb_connection", help="The region's OVN Southbound database."),
    cfg.StrOpt("ssl_key_file", help="Client key for ssl: remotes."),
    cfg.StrOpt("ssl_cert_file", help="Client certificate for ssl: remotes."),
    cfg.StrOpt("ssl_ca_cert", help="CA certificate that signed the databases' certificates."),
    cfg.FloatOpt("timeout", default=10.0, min=0.1, help="Seconds each call to either database may take."),
]
OVN_AGENT_TYPES = ("OVN Controller agent", "OVN Controller Gateway agent")
BACKEND_TTL = 300.0  # seconds a region's reported backend is trusted


def register_opts(conf: cfg.ConfigOpts) -> None:
    for opt in OPTS:  # one by one: an option registered elsewhere skips only itself
        try:
            conf.register_opt(opt, group="isthmus")
        except cfg.DuplicateOptError:
            pass
    register_auth_opts(conf, SERVICE_AUTH_GROUP)
    for group in ovn_groups(conf):
        conf.register_opts(OVN_OPTS, group=group)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """For oslo-config-generator (namespace isthmus-xjob-network): what the
    network handlers read in isthmus-xjob's configuration; one ``[ovn:<region>]``
    section per ML2/OVN region."""
    return [("isthmus", OPTS), (SERVICE_AUTH_GROUP, auth_opts()), (f"{OVN_GROUP_PREFIX}<region>", OVN_OPTS)]


def ovn_groups(conf: cfg.ConfigOpts) -> list[str]:
    """The ``[ovn:<region>]`` sections present in the configuration files."""
    return sorted(s for s in conf.list_all_sections() if s.startswith(OVN_GROUP_PREFIX))


def load_ovn_regions(conf: cfg.ConfigOpts) -> dict[str, OvnRegion]:
    regions = {}
    for group in ovn_groups(conf):
        options = conf[group]
        region = group[len(OVN_GROUP_PREFIX):]
        if not options.nb_connection or not options.sb_connection:
            raise ValueError(f"[{group}]: nb_connection and sb_connection are both needed")
        tls = (TLSFiles(options.ssl_key_file, options.ssl_cert_file, options.ssl_ca_cert)
               if options.ssl_key_file else None)
        regions[region] = OvnRegion(region, OvsdbClient(options.nb_connection, options.timeout, tls),
                                    OvsdbClient(options.sb_connection, options.timeout, tls))
    return regions


@dataclass(frozen=True)
class DeleteBrake:
    """At most ``max(floor, share x bound ports)`` deletes at central per pass."""

    share: float = 0.1
    floor: int = 3

    def allows(self, deletes: int, bound: int) -> bool:
        return deletes <= max(self.floor, math.floor(self.share * bound))


@dataclass
class Services:
    registry: Registry
    clients: RegionClients
    central_region: str
    tombstones: Tombstones
    cross_region_l2: str = "shadow"
    transit_cidrs: dict[int, str] = field(default_factory=lambda: {4: "100.64.0.0/24", 6: "fd00:6973:7468::/64"})
    delete_brake: DeleteBrake = field(default_factory=DeleteBrake)
    binding_grace: timedelta = timedelta(minutes=2)
    tunnel_keys: TunnelKeys | None = None
    ovn_regions: dict[str, OvnRegion] = field(default_factory=dict)
    # region -> remote chassis -> when first seen unreferenced (collect_chassis' grace)
    unreferenced_chassis: dict[str, dict[str, datetime]] = field(default_factory=dict, repr=False)
    # sg_member_sync's hints: address group ids, group copies wired (address_groups.py)
    address_groups: KnownAddressGroups = field(default_factory=KnownAddressGroups, repr=False)
    _network_types: dict[str, str | None] = field(default_factory=dict, repr=False)
    _backends: dict[str, tuple[float, bool]] = field(default_factory=dict, repr=False)

    @property
    def central(self) -> NeutronClient:
        return self.clients.neutron(self.central_region)

    def neutron(self, region: str) -> NeutronClient:
        return self.clients.neutron(region)

    def nova(self, region: str) -> NovaClient:
        return self.clients.nova(region)

    def ovn(self, region: str) -> OvnRegion | None:
        """The region's OVN databases when it runs ML2/OVN and the worker may reach them."""
        return self.ovn_regions.get(region)

    def binds_shadows(self, region: str) -> bool:
        """Whether shadow ports can carry L2 into the region: not on ML2/OVN (an
        OVN region binds ports to chassis; a shadow's host has none). Configured
        ``[ovn:<region>]`` decides; else the region's agents tell (cached)."""
        if region in self.ovn_regions:
            return False
        checked = self._backends.get(region)
        if checked is None or time.monotonic() - checked[0] > BACKEND_TTL:
            try:
                ovn = any(self.neutron(region).list("agents", agent_type=t, fields="id") for t in OVN_AGENT_TYPES)
            except Unavailable:
                ovn = checked[1] if checked else False
            if ovn:
                LOG.error("%s runs ML2/OVN (its agents say so) but the worker has no [ovn:%s] section: no "
                          "cross-region L2 there until it has one", region, region)
            checked = (time.monotonic(), ovn)
            self._backends[region] = checked
        return not checked[1]

    def wants_shadows(self, network: dict) -> bool:
        """Shadows carry VxLAN between regions; VLAN and flat networks ride the
        physical network, which already spans them."""
        return self.cross_region_l2 == "shadow" and network.get("provider:network_type") == "vxlan"

    def network_wants_shadows(self, network_id: str) -> bool:
        return self.cross_region_l2 == "shadow" and self.network_type(network_id) == "vxlan"

    def network_type(self, network_id: str) -> str | None:
        """A network's segment type (None: central has no such network). Cached:
        central refuses segment changes, so it never changes while it exists."""
        if network_id not in self._network_types:
            network = self.central.get("networks", network_id)
            if network is None:
                return None
            self._network_types[network_id] = network.get("provider:network_type")
        return self._network_types[network_id]

    def routed_regions(self, network_id: str) -> set[str]:
        """Regions where a port of the network was bound (they need shadows)."""
        return {r for r in (self.region_of_pod(x.pod_id) for x in self.registry.routings_of(network_id, "network"))
                if r}

    def region_of_pod(self, pod_id: str) -> str | None:
        pod = next((p for p in self.registry.pods() if p.pod_id == pod_id), None)
        return pod.region_name if pod else None


class LazyServices:
    """Built on the first job, so a worker starts even if Keystone is not up yet."""

    def __init__(self, conf: cfg.ConfigOpts | None) -> None:
        self.conf = conf
        self._services: Services | None = None
        self._lock = threading.Lock()

    def get(self) -> Services:
        with self._lock:
            if self._services is None:
                if self.conf is None:
                    raise RuntimeError("network reconcilers are not configured (no worker configuration)")
                conf = self.conf
                timeout = conf.isthmus.region_timeout
                session = load_session(conf, SERVICE_AUTH_GROUP, default_timeout=timeout)
                engine = make_engine(conf.database.connection)
                self._services = Services(
                    registry=Registry(engine),
                    tombstones=Tombstones(engine),
                    clients=RegionClients(session, user_agent="isthmus-xjob", timeout=timeout),
                    central_region=conf.isthmus.central_region,
                    cross_region_l2=conf.isthmus.cross_region_l2,
                    transit_cidrs={4: conf.isthmus.transit_cidr, 6: conf.isthmus.transit_cidr_v6},
                    delete_brake=DeleteBrake(conf.isthmus.binding_sync_delete_share,
                                             conf.isthmus.binding_sync_delete_floor),
                    binding_grace=timedelta(seconds=conf.isthmus.binding_sync_grace),
                    tunnel_keys=TunnelKeys(engine),
                    ovn_regions=load_ovn_regions(conf),
                )
            return self._services
