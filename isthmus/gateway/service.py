"""``isthmus-gateway``: build the gateway from its configuration and serve it."""

from __future__ import annotations

import logging
import sys
from collections.abc import Collection, Sequence

from aiohttp import web

from isthmus.gateway import config


class MasterRegionMissing(Exception):
    """Several regions and no ``[gateway] master_region``: refuse to start."""


def require_master(registry, central_region: str, master_region: str | None, regions: Collection[str] = ()) -> None:
    """Refuse to start with several regions and no master (routing.Router.master_region)."""
    if master_region:
        return
    regional = [p.region_name for p in registry.regional_pods()
                if p.region_name != central_region and (not regions or p.region_name in regions)]
    if len(regional) > 1:
        raise MasterRegionMissing(f"[gateway] master_region is not set and several regions are registered "
                                  f"({', '.join(regional)}): name the one that holds the global objects")


def build(conf):
    """The Gateway object for a parsed configuration (no I/O until served)."""
    from isthmus.db import make_engine
    from isthmus.db.migration import require_current
    from isthmus.gateway import surface
    from isthmus.gateway.app import Gateway, Settings
    from isthmus.gateway.auth import KeystoneValidator
    from isthmus.gateway.catalog import Catalog, keystone_loader
    from isthmus.gateway.core import Core
    from isthmus.gateway.idempotency import CreateLedger
    from isthmus.gateway.proxy import Upstream
    from isthmus.gateway.routing import Router
    from isthmus.registry import Registry

    g = conf.gateway
    engine = make_engine(conf.database.connection)
    require_current(engine, "isthmus-gateway")
    registry = Registry(engine)
    require_master(registry, g.central_region, g.master_region, g.regions)
    session = config.service_session(conf)
    capacity = None
    if g.placement_policy == "most_free_capacity":
        from isthmus.gateway.capacity import CapacityReader, read_capacity

        interface = conf.service_credentials.interface
        capacity = CapacityReader(lambda region: read_capacity(session, region, interface), g.capacity_ttl)
    router = Router(registry, g.central_region, g.master_region, capacity=capacity, regions=g.regions)
    catalog = Catalog(keystone_loader(session), conf.service_credentials.interface, {g.central_region},
                      g.catalog_ttl)
    settings = Settings(public_url=g.public_url, list_timeout=g.list_timeout, request_timeout=g.request_timeout,
                        strict_lists=g.strict_lists, max_limit=g.max_limit, lookup_unrouted=g.lookup_unrouted,
                        catalog_ttl=g.catalog_ttl, max_request_body=g.max_request_body,
                        stream_replies_over=g.stream_replies_over,
                        quota_unreachable_region=g.quota_unreachable_region)
    upstream = Upstream(g.connection_limit, g.per_region_limit, g.breaker_cooldown,
                        breaker_threshold=g.breaker_threshold)
    core = Core.build(settings, router, catalog, upstream)
    gateway = Gateway(core, KeystoneValidator(conf), surface.declare(core, conf, engine, session),
                      CreateLedger(engine, stale_after=g.request_timeout + 30))
    return gateway


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``isthmus-gateway`` console script."""
    conf = config.load(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.DEBUG if conf.debug else logging.INFO,
                        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    from isthmus.db.migration import SchemaOutdated

    try:
        gateway = build(conf)
    except (SchemaOutdated, MasterRegionMissing) as exc:
        logging.getLogger(__name__).error("%s", exc)
        return 2
    from isthmus import tls

    web.run_app(gateway.make_app(), host=conf.gateway.bind_host, port=conf.gateway.bind_port,
                access_log=None, print=None, shutdown_timeout=5, ssl_context=tls.server_context(conf))
    return 0


if __name__ == "__main__":
    sys.exit(main())
