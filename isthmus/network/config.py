"""oslo.config options of the Isthmus Neutron plugins, in the ``[isthmus]`` group.

Central reads ``database_connection`` (the Isthmus DB: registry and jobs).
Local reads its region, its AZ, ``central_timeout``, and the service
credentials it uses to reach central Neutron, in ``[isthmus_central]``
(standard keystoneauth options)."""

from __future__ import annotations

from oslo_config import cfg

from isthmus.clients.neutron import DEFAULT_TIMEOUT
from isthmus.clients.regions import auth_opts, register_auth_opts

GROUP = "isthmus"
CENTRAL_AUTH_GROUP = "isthmus_central"

OPTS = [
    cfg.StrOpt("region_name", help="This Neutron's region (a pod of the Isthmus registry)."),
    cfg.StrOpt("availability_zone", default="",
               help="Local plugin: the availability zone of this region (networks hinted to it "
                    "are materialised here)."),
    cfg.StrOpt("central_region", default="CentralRegion",
               help="Local plugin: the region whose Neutron is central."),
    cfg.StrOpt("database_connection", secret=True,
               help="Central plugin: the Isthmus database (registry and jobs)."),
    cfg.StrOpt("delete_journal_dir", default="$state_path/isthmus/deleted-ports",
               help="Local plugin: where ports deleted here while central was unreachable wait, one "
                    "file each, until central has deleted them too. On local disk, kept across "
                    "restarts: central deletes a region's port only on this record (or on Nova's word "
                    "that its server is gone), never because a list lacks it."),
    cfg.FloatOpt("central_timeout", default=DEFAULT_TIMEOUT, min=0.1,
                 help="Local plugin: seconds each HTTP attempt to central Neutron and to Keystone may "
                      "take (an API worker waits that long at most). [isthmus_central] timeout, when "
                      "set, wins."),
]

_registered = False


def register(conf: cfg.ConfigOpts = cfg.CONF) -> None:
    global _registered
    if _registered:
        return
    conf.register_opts(OPTS, group=GROUP)
    register_auth_opts(conf, CENTRAL_AUTH_GROUP)
    _registered = True


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """For oslo-config-generator (namespace isthmus-neutron): the plugins' options in
    neutron-server's configuration."""
    return [(GROUP, OPTS), (CENTRAL_AUTH_GROUP, auth_opts())]
