"""Job handlers that wire regions together; the job engine loads them through
the ``isthmus.jobs.handlers`` entry point (it names no handler itself)."""

from __future__ import annotations

from oslo_config import cfg

from isthmus.jobs import HandlerRegistry, JobContext, ResourceRef, Resync
from isthmus.network import jobtypes
from isthmus.network.reconcilers.binding_sync import sync_bindings
from isthmus.network.reconcilers.network_sync import sync_network
from isthmus.network.reconcilers.port_sync import sync_ports
from isthmus.network.reconcilers.router_sync import sync_router
from isthmus.network.reconcilers.security_groups import sync_security_groups
from isthmus.network.reconcilers.services import LazyServices, register_opts
from isthmus.network.reconcilers.sg_members import sync_members

BATCH_SIZE = 200
BATCH_WINDOW = 0.05  # seconds


def register_handlers(registry: HandlerRegistry, conf: cfg.ConfigOpts | None = None) -> None:
    if conf is not None:
        register_opts(conf)
    services = LazyServices(conf)
    interval = conf.isthmus.resync_interval if conf is not None else 60.0

    def routed(resource_type: str, key: str):
        def list_resources():
            seen = set()
            for routing in services.get().registry.list_routings({"resource_type": resource_type}):
                value = getattr(routing, key)
                if value not in seen:
                    seen.add(value)
                    yield ResourceRef(value, routing.project_id)
        return list_resources

    registry.register(
        jobtypes.NETWORK_SYNC, lambda ctx: sync_network(services.get(), ctx),
        resource_keys=("network_id",), resync=Resync(interval, routed("network", "top_id")))
    def regions():
        for pod in services.get().registry.regional_pods():
            yield ResourceRef(pod.region_name, None)

    registry.register(jobtypes.BINDING_SYNC, lambda ctx: sync_bindings(services.get(), ctx),
                      resource_keys=("region",), resync=Resync(interval, regions))
    # Batched: a burst of port events (servers booting) is one run with bulk calls;
    # the window is short beside a boot, and long enough for a burst to gather.
    registry.register_batch(jobtypes.PORT_SYNC, lambda batch: sync_ports(services.get(), batch),
                            resource_keys=("port_id",), max_size=BATCH_SIZE, window=BATCH_WINDOW)
    registry.register(
        jobtypes.SECURITY_GROUP_SYNC, lambda ctx: sync_security_groups(services.get(), ctx),
        resource_keys=("project_id",), resync=Resync(interval, routed("security_group", "project_id")))
    registry.register(
        jobtypes.ROUTER_SYNC, lambda ctx: sync_router(services.get(), ctx),
        resource_keys=("router_id",), resync=Resync(interval, routed("router", "top_id")))
    registry.register_batch(jobtypes.SG_MEMBER_SYNC, lambda batch: sync_members(services.get(), batch),
                            resource_keys=("security_group_id", "address"), max_size=BATCH_SIZE,
                            window=BATCH_WINDOW)


__all__ = ["JobContext", "register_handlers"]
