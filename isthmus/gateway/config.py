"""oslo.config options of isthmus-gateway."""

from __future__ import annotations

from collections.abc import Sequence

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from isthmus import tls

gateway_opts = [
    cfg.HostAddressOpt("bind_host", default="127.0.0.1", help="Address to listen on."),
    cfg.PortOpt("bind_port", default=19998, help="Port to listen on (Nova and Cinder share it)."),
    cfg.URIOpt("public_url", help="Base URL clients reach the gateway at (links are rewritten to it). "
               "Default: the scheme and Host of each request."),
    cfg.StrOpt("central_region", default="CentralRegion",
               help="Keystone region of the gateway's own endpoints; never a target region."),
    cfg.StrOpt("master_region", help="Region that holds the global objects (flavors, keypairs, quotas, "
               "volume types, images). Required once several regions are registered (the gateway "
               "refuses to start without it); with one region, that region."),
    cfg.ListOpt("regions", default=[],
                help="The regions behind this gateway (the registry's regional pods of these names); "
                "empty: every registered region. A gateway for a subset of a cloud's regions lists them."),
    cfg.FloatOpt("list_timeout", default=10.0, min=0.1,
                 help="Per-region timeout of a list fan-out; a region slower than this is 'down'."),
    cfg.FloatOpt("request_timeout", default=120.0, min=0.1, help="Timeout of a request forwarded to one region."),
    cfg.BoolOpt("strict_lists", default=False,
                help="A region that is down fails a list with 503 (default: skip it and log)."),
    cfg.IntOpt("max_limit", default=1000, min=1, help="Largest page of a merged list (Nova's osapi_max_limit)."),
    cfg.IntOpt("per_region_limit", default=50, min=1,
               help="Requests one region may have in flight (a hung region cannot take the whole pool)."),
    cfg.FloatOpt("breaker_cooldown", default=10.0, min=0.1,
                 help="Seconds a region that timed out or refused is not asked again (calls fail at once)."),
    cfg.IntOpt("breaker_threshold", default=1, min=1,
               help="Consecutive timeouts or refusals of a region's service that open its breaker. "
                    "A call that failed while the service answered others never counts (busy, not sick)."),
    cfg.StrOpt("quota_unreachable_region", default="last_known", choices=[
        ("last_known", "count an unreachable region's usage as last seen (0 if never seen): creates in the "
                       "healthy regions go on; each region's own limits still hold"),
        ("refuse", "refuse creates (503) while any region's usage cannot be counted")],
        help="Global quota check when a region does not answer."),
    cfg.IntOpt("max_request_body", default=114688, min=1024,
               help="Largest request body in bytes (Nova's and Cinder's default); a larger one is a 413."),
    cfg.IntOpt("stream_replies_over", default=1048576, min=1024,
               help="A successful reply of the master region longer than this many bytes is streamed "
                    "to the client (links rewritten on the fly) instead of being read into memory."),
    cfg.IntOpt("connection_limit", default=200, min=1, help="Pooled connections to all regions together."),
    cfg.IntOpt("catalog_ttl", default=300, min=1,
               help="Seconds endpoints and microversion ranges are cached; refreshed early on connection errors."),
    cfg.StrOpt("placement_policy", default="fewest_projects", choices=[
        ("fewest_projects", "a project's first binding goes to the region (of its AZ) with the fewest "
                            "bound projects"),
        ("most_free_capacity", "to the region with the most free RAM, then VCPUs, as its Placement service "
                               "reports them (a region whose Placement does not answer ranks last)")],
        help="Where a project without a binding is bound (an admin can bind it first through the Admin API; "
             "a region whose breaker is open gets no new binding while another fits)."),
    cfg.FloatOpt("capacity_ttl", default=30.0, min=0.0,
                 help="Seconds a region's capacity read from Placement is reused (most_free_capacity)."),
    cfg.BoolOpt("lookup_unrouted", default=False,
                help="GET by an id the routing table does not know asks every region (default: 404 at once; "
                "lists adopt resources they see, so anything listed is routable)."),
    cfg.BoolOpt("replicate_images", default=True,
                help="Copy a master-region image (same UUID) into the target region before a server boots "
                "from it there."),
    cfg.IntOpt("image_copy_workers", default=4, min=1,
               help="Image copies made at once (their own pool: they never hold up quota checks or creates)."),
    cfg.IntOpt("image_copy_queue", default=8, min=0,
               help="Image copies that may wait for a worker; a boot needing one more is a 503 (retry later)."),
    cfg.FloatOpt("image_copy_timeout", default=900.0, min=1.0,
                 help="Seconds a boot waits for its image copy; then a 503 (the copy goes on, a retry finds it)."),
]

cli_opts = [cfg.BoolOpt("debug", short="d", default=False, help="Debug logging.")]

SERVICE_CREDENTIALS = "service_credentials"
INTERFACE_OPT = cfg.StrOpt("interface", default="public", help="Endpoint interface to reach regions by.")


def register_opts(conf: cfg.ConfigOpts) -> None:
    from isthmus.jobs import config as jobs_config

    conf.register_opts(gateway_opts, group="gateway")
    tls.register_opts(conf)  # [ssl]: serve https
    jobs_config.register_database_opts(conf)  # [database] connection: the Isthmus DB (registry, jobs)
    ks_loading.register_auth_conf_options(conf, SERVICE_CREDENTIALS)
    ks_loading.register_session_conf_options(conf, SERVICE_CREDENTIALS)
    conf.register_opt(INTERFACE_OPT, group=SERVICE_CREDENTIALS)


def load(argv: Sequence[str] | None = None, *, default_files: Sequence[str] | None = None) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    register_opts(conf)
    conf.register_cli_opts(cli_opts)
    conf(list(argv or []), project="isthmus", prog="isthmus-gateway",
         default_config_files=list(default_files) if default_files is not None else None)
    return conf


SERVICE_TIMEOUT = 30.0


def service_session(conf: cfg.ConfigOpts):
    """The gateway's own keystoneauth session (endpoint discovery, propagation)."""
    from isthmus.clients import load_session

    # Bounded by default (keystoneauth's own default is none): token fetches,
    # catalog loads, Glance copies' control calls, inline syncs.
    return load_session(conf, SERVICE_CREDENTIALS, default_timeout=SERVICE_TIMEOUT)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """For oslo-config-generator (namespace isthmus-gateway)."""
    from isthmus.clients.regions import auth_opts
    from isthmus.jobs import config as jobs_config

    return [("gateway", gateway_opts), (tls.GROUP, tls.OPTS), ("database", jobs_config.database_opts),
            (SERVICE_CREDENTIALS, [*auth_opts(), INTERFACE_OPT])]
