"""The parts every gateway feature may be given, built first and with no I/O.

``service.build`` makes one ``Core`` from the configuration, declares the surface
(surface.py) from it, and hands both to the ``Gateway``. A feature takes the parts
it uses as constructor arguments (a router, the forwarder, the settings), never the
gateway itself: nothing is installed into another object after it is built.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aiohttp import web

from isthmus.gateway.call import Call, Hook, Settings
from isthmus.gateway.catalog import Catalog
from isthmus.gateway.forwarding import Forwarder
from isthmus.gateway.pools import BoundedPool
from isthmus.gateway.proxy import Upstream
from isthmus.gateway.routing import Router
from isthmus.gateway.versions import Versions

LOG = logging.getLogger(__name__)

# (api name, collection) -> hooks run after a successful write at the master region.
WriteHooks = Mapping[tuple[str, str], Sequence[Hook]]


@dataclass(frozen=True)
class Core:
    settings: Settings
    router: Router
    catalog: Catalog
    upstream: Upstream
    fwd: Forwarder  # the one way to a region
    versions: Versions  # version documents and each API's microversion range
    # Slow blocking work (image copies, inline syncs, service checks, the shared
    # DB), bounded and apart from token validation (pools.py).
    background: BoundedPool

    @classmethod
    def build(cls, settings: Settings, router: Router, catalog: Catalog, upstream: Upstream) -> Core:
        return cls(settings, router, catalog, upstream, Forwarder(settings, catalog, upstream, router),
                   Versions(settings, catalog, upstream), BoundedPool(8, "gateway-work"))


class MasterRegion:
    """Global objects and every call the gateway does not route by id go to the
    master region; a successful write there runs the hooks declared for its
    collection (globals.py: spread the object to every region)."""

    def __init__(self, router: Router, fwd: Forwarder, write_hooks: WriteHooks) -> None:
        self.router = router
        self.fwd = fwd
        self.write_hooks = write_hooks

    async def forward(self, call: Call) -> web.StreamResponse:
        region = await self.router.master_region()
        # Reads of the master (flavor, hypervisor, usage lists) may be large: streamed.
        reply = await self.fwd.forward(call, region, call.method, call.rel, stream=call.method == "GET")
        if 200 <= reply.status < 300 and call.method in ("POST", "PUT", "DELETE", "PATCH"):
            for hook in self.write_hooks.get((call.api.name, call.segments[0]), ()):
                try:
                    await hook(call, region, reply)
                except Exception:  # noqa: BLE001 - propagation retries by itself
                    LOG.exception("%s: write hook for %s failed", call.request_id, call.segments[0])
        return self.fwd.render(call, reply, region)
