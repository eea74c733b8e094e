"""The handlers as the worker runs them: each built once, from the worker's
configuration, with the collaborators it uses and no other.

The collaborators, each shared by the handlers that need it:

* :class:`~regions.Regions`: central's and each region's Neutron (and Nova)
  over one Keystone session (``[isthmus_service]``, ``[isthmus] central_region``);
* :class:`~isthmus.registry.Registry` and :class:`~topology.Topology`: the
  registry, and what it says about where things are (``[database] connection``);
* :class:`~isthmus.registry.Tombstones`: central's recorded deletes, the only
  proof a copy may go;
* :class:`~shadows.ShadowPolicy`: where shadow ports carry L2 (and their ports' groups);
* :class:`~ovn.access.OvnAccess`: the ML2/OVN regions' databases and central's
  tunnel keys (``[ovn:<region>]``);
* :class:`~address_groups.KnownAddressGroups`: sg_member_sync's hints;
* :class:`~port_sync.PortWriter`: port plans carried out (port_sync, network_sync);
* :class:`~settings.WiringSettings`: the values read once from ``[isthmus]``;
* :class:`~isthmus.jobs.JobStore`: the queue, where network_sync sees which
  ports' own port_sync is still to run.
"""

from __future__ import annotations

from dataclasses import dataclass

from oslo_config import cfg

from isthmus.clients import RegionClients, load_session
from isthmus.clients.ovsdb import OvsdbClient, TLSFiles
from isthmus.db import make_engine
from isthmus.jobs import JobStore
from isthmus.network.reconcilers.address_groups import KnownAddressGroups
from isthmus.network.reconcilers.binding_sync import BindingSync
from isthmus.network.reconcilers.network_sync import NetworkSync, PortSyncJobs
from isthmus.network.reconcilers.ovn.access import OvnAccess
from isthmus.network.reconcilers.ovn.region import OvnRegion
from isthmus.network.reconcilers.port_sync import PortSync, PortWriter
from isthmus.network.reconcilers.regions import Regions
from isthmus.network.reconcilers.router_sync import RouterSync
from isthmus.network.reconcilers.security_groups import SecurityGroupSync
from isthmus.network.reconcilers.settings import OVN_GROUP_PREFIX, SERVICE_AUTH_GROUP, WiringSettings, ovn_groups
from isthmus.network.reconcilers.sg_members import SgMemberSync
from isthmus.network.reconcilers.shadows import ShadowPolicy
from isthmus.network.reconcilers.topology import Topology
from isthmus.registry import Registry, Tombstones, TunnelKeys


@dataclass(frozen=True)
class Handlers:
    """One of each, for the job engine (``register_handlers``); the registry
    too, which the periodic resyncs list their resources from."""

    network_sync: NetworkSync
    binding_sync: BindingSync
    port_sync: PortSync
    security_group_sync: SecurityGroupSync
    router_sync: RouterSync
    sg_member_sync: SgMemberSync
    registry: Registry


def build_handlers(conf: cfg.ConfigOpts) -> Handlers:
    """The worker's one way to its handlers (registered options, parsed configuration)."""
    timeout = conf.isthmus.region_timeout
    session = load_session(conf, SERVICE_AUTH_GROUP, default_timeout=timeout)
    engine = make_engine(conf.database.connection)
    return wire_handlers(
        regions=Regions(RegionClients(session, user_agent="isthmus-xjob", timeout=timeout),
                        conf.isthmus.central_region),
        registry=Registry(engine),
        tombstones=Tombstones(engine),
        ovn=OvnAccess(load_ovn_regions(conf), TunnelKeys(engine)),
        settings=WiringSettings.from_conf(conf),
        jobs=JobStore(engine))


def wire_handlers(regions: Regions, registry: Registry, tombstones: Tombstones, ovn: OvnAccess,
                  settings: WiringSettings, jobs: JobStore) -> Handlers:
    """Each handler given what it uses; what two handlers share is one object
    (its caches and hints serve both). ``jobs``: the queue, where network_sync
    sees which ports' own port_sync is still to run."""
    topology = Topology(registry)
    shadows = ShadowPolicy(settings.cross_region_l2, regions, ovn.regions.keys())
    writer = PortWriter(regions, registry)
    return Handlers(
        network_sync=NetworkSync(regions, registry, topology, tombstones, shadows, ovn, writer,
                                 PortSyncJobs(jobs)),
        binding_sync=BindingSync(regions, topology, settings.delete_brake, settings.binding_grace, ovn),
        port_sync=PortSync(regions, topology, tombstones, shadows, ovn, writer),
        security_group_sync=SecurityGroupSync(regions, registry, topology, tombstones, shadows),
        router_sync=RouterSync(regions, registry, topology, tombstones, ovn, settings.transit_cidrs),
        sg_member_sync=SgMemberSync(regions, topology, shadows, KnownAddressGroups()),
        registry=registry,
    )


def load_ovn_regions(conf: cfg.ConfigOpts) -> dict[str, OvnRegion]:
    """One :class:`OvnRegion` per ``[ovn:<region>]`` section."""
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
