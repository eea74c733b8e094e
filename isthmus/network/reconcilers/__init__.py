"""Job handlers that wire regions together; the job engine loads them through
the ``isthmus.jobs.handlers`` entry point (it names no handler itself).

Each handler is an object holding the collaborators it uses (:mod:`worker`
builds them, once, on the first job: a worker starts even if Keystone or the
database is not up yet)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from oslo_config import cfg

from isthmus.jobs import HandlerRegistry, JobContext, ResourceRef, Resync
from isthmus.jobs.models import HINTS
from isthmus.lazy import Lazy
from isthmus.network import jobtypes
from isthmus.network.reconcilers.settings import register_opts
from isthmus.network.reconcilers.worker import Handlers, build_handlers

BATCH_SIZE = 200
BATCH_WINDOW = 0.05  # seconds
# The payload of a periodic resync's job; an event's or an operator's enqueue of
# the same key drops the hint (coalescing keeps only hints every enqueue gave).
BACKSTOP_PAYLOAD: Mapping[str, Any] = {HINTS: {jobtypes.BACKSTOP_ONLY: True}}


def register_handlers(registry: HandlerRegistry, conf: cfg.ConfigOpts | None = None) -> None:
    if conf is not None:
        register_opts(conf)
    built: Lazy[Handlers] = Lazy()
    interval = conf.isthmus.resync_interval if conf is not None else 60.0

    def handlers() -> Handlers:
        if conf is None:
            raise RuntimeError("network reconcilers are not configured (no worker configuration)")
        return built.get(lambda: build_handlers(conf))

    def routed(resource_type: str, key: str, payload: Mapping[str, Any] | None = None
               ) -> Callable[[], Iterator[ResourceRef]]:
        def list_resources() -> Iterator[ResourceRef]:
            seen = set()
            for routing in handlers().registry.list_routings({"resource_type": resource_type}):
                value = getattr(routing, key)
                if value not in seen:
                    seen.add(value)
                    yield ResourceRef(value, routing.project_id, dict(payload or {}))
        return list_resources

    def regions() -> Iterator[ResourceRef]:
        for pod in handlers().registry.regional_pods():
            yield ResourceRef(pod.region_name, None, dict(BACKSTOP_PAYLOAD))

    registry.register(
        jobtypes.NETWORK_SYNC, lambda ctx: handlers().network_sync.run(ctx),
        resource_keys=("network_id",),
        resync=Resync(interval, routed("network", "top_id", BACKSTOP_PAYLOAD)))
    registry.register(jobtypes.BINDING_SYNC, lambda ctx: handlers().binding_sync.run(ctx),
                      resource_keys=("region",), resync=Resync(interval, regions))
    # Batched: a burst of port events (servers booting) is one run with bulk calls;
    # the window is short beside a boot, and long enough for a burst to gather.
    registry.register_batch(jobtypes.PORT_SYNC, lambda batch: handlers().port_sync.run(batch),
                            resource_keys=("port_id",), max_size=BATCH_SIZE, window=BATCH_WINDOW)
    registry.register(
        jobtypes.SECURITY_GROUP_SYNC, lambda ctx: handlers().security_group_sync.run(ctx),
        resource_keys=("project_id",), resync=Resync(interval, routed("security_group", "project_id")))
    registry.register(
        jobtypes.ROUTER_SYNC, lambda ctx: handlers().router_sync.run(ctx),
        resource_keys=("router_id",), resync=Resync(interval, routed("router", "top_id")))
    registry.register_batch(jobtypes.SG_MEMBER_SYNC, lambda batch: handlers().sg_member_sync.run(batch),
                            resource_keys=("security_group_id", "address"), max_size=BATCH_SIZE,
                            window=BATCH_WINDOW)


__all__ = ["JobContext", "register_handlers"]
