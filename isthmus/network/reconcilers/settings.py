"""What the worker's configuration says to the network handlers: the options
(``[isthmus]``, ``[isthmus_service]``, one ``[ovn:<region>]`` per ML2/OVN
region) and :class:`WiringSettings`, the values the handlers act on, read once.
The collaborators built from them are made in :mod:`worker`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from oslo_config import cfg

from isthmus.clients.neutron import DEFAULT_TIMEOUT
from isthmus.clients.regions import auth_opts, register_auth_opts

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


@dataclass(frozen=True)
class DeleteBrake:
    """At most ``max(floor, share x bound ports)`` deletes at central per pass."""

    share: float = 0.1
    floor: int = 3

    def allows(self, deletes: int, bound: int) -> bool:
        return deletes <= max(self.floor, math.floor(self.share * bound))


def _default_transit_cidrs() -> dict[int, str]:
    return {4: "100.64.0.0/24", 6: "fd00:6973:7468::/64"}


@dataclass(frozen=True)
class WiringSettings:
    """How the handlers wire regions, as configured (``[isthmus]``)."""

    cross_region_l2: str = "shadow"  # "shadow" or "noop": who carries VxLAN between regions
    transit_cidrs: Mapping[int, str] = field(default_factory=_default_transit_cidrs)  # IP version -> range
    delete_brake: DeleteBrake = field(default_factory=DeleteBrake)  # binding_sync's deletes at central
    binding_grace: timedelta = timedelta(minutes=2)  # binding_sync leaves a port changed this recently

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> WiringSettings:
        options = conf.isthmus
        return cls(cross_region_l2=options.cross_region_l2,
                   transit_cidrs={4: options.transit_cidr, 6: options.transit_cidr_v6},
                   delete_brake=DeleteBrake(options.binding_sync_delete_share, options.binding_sync_delete_floor),
                   binding_grace=timedelta(seconds=options.binding_sync_grace))
