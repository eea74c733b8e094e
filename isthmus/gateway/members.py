"""Calls on one routed object (``/servers/{id}...``, ``/volumes/{id}...``): sent
to the region that holds it, found through the routing table."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

from isthmus.gateway.apis import Routed
from isthmus.gateway.call import Call, Settings
from isthmus.gateway.faults import Fault
from isthmus.gateway.forwarding import Forwarder
from isthmus.gateway.proxy import Reply
from isthmus.gateway.routing import Router

LOG = logging.getLogger(__name__)

# (api name, region, path) -> whether the object is gone, asked with service credentials.
ConfirmAbsent = Callable[[str, str, str], Awaitable[bool]]
RewriteReply = Callable[[Call, Routed, Reply], Awaitable[Reply]]


class MemberCalls:
    def __init__(self, settings: Settings, router: Router, fwd: Forwarder,
                 rewrite_reply: Sequence[RewriteReply] = (), confirm_absent: ConfirmAbsent | None = None) -> None:
        self.settings = settings
        self.router = router
        self.fwd = fwd
        # Rewrite a region's reply before it is rendered (e.g. a copy's id back to the gateway's).
        self.rewrite_reply = tuple(rewrite_reply)
        # A 404 through the caller's token may only mean "not yours": only this
        # (service credentials) may confirm an object is gone.
        self.confirm_absent = confirm_absent

    async def handle(self, call: Call, spec: Routed) -> web.Response:
        segs = call.segments
        resource_id = segs[1]
        region = await self.router.region_of(spec.kind, resource_id)
        if region is None and self.settings.lookup_unrouted:
            region = await self._lookup(call, spec, resource_id)
        if region is None and spec.kind == "server" and call.method == "GET" and segs[2:3] == ["os-instance-actions"]:
            return await self._deleted_server_actions(call, spec, resource_id)
        if region is None:
            raise Fault(404, f"{spec.label} {resource_id} could not be found.")
        if spec.kind == "server" and (len(segs), call.method) in ((3, "POST"), (4, "PUT")) and (
                segs[2] == "os-volume_attachments"):  # attach, swap
            await self._check_attach(call, region)
        reply = await self.fwd.forward(call, region, call.method, call.rel, unavailable=(spec, resource_id))
        if reply.status == 404 and len(segs) == 2 and call.method in ("GET", "PUT", "DELETE"):
            await self._forget_if_gone(call, spec, resource_id, region)
        for rewrite in self.rewrite_reply:
            reply = await rewrite(call, spec, reply)
        return self.fwd.render(call, reply, region, spec)

    async def _forget_if_gone(self, call: Call, spec: Routed, resource_id: str, region: str) -> None:
        """Another project's id answers 404 too: only a confirmed absence, asked
        with service credentials, removes the routing (never a stranger's 404)."""
        if self.confirm_absent is None:
            return
        try:
            gone = await self.confirm_absent(call.api.name, region, f"/{spec.list_key}/{resource_id}")
        except Exception as err:  # noqa: BLE001 - not confirmed: keep the routing
            LOG.warning("%s: could not confirm %s %s is gone from %s: %s", call.request_id, spec.kind,
                        resource_id, region, err)
            return
        if gone:
            LOG.info("%s: %s %s is gone from %s; routing removed", call.request_id, spec.kind, resource_id, region)
            await self.router.forget(spec.kind, resource_id)

    async def _check_attach(self, call: Call, server_region: str) -> None:
        try:
            volume_id = json.loads(call.body)["volumeAttachment"]["volumeId"]
        except (ValueError, KeyError, TypeError, RecursionError):
            return  # the region answers with its own 400
        if not isinstance(volume_id, str):
            return  # Nova's schema answers 400 naming volumeId
        volume_region = await self.router.region_of("volume", str(volume_id))
        if volume_region is None:
            raise Fault(404, f"Volume {volume_id} could not be found.")
        if volume_region != server_region:
            if not await self.router.visible_to("volume", volume_id, call.identity):
                raise Fault(404, f"Volume {volume_id} could not be found.")  # as the region answers a stranger
            raise Fault(400, f"Server and volume {volume_id} are not in the same region.")

    async def _deleted_server_actions(self, call: Call, spec: Routed, resource_id: str) -> web.Response:
        """Nova (2.21+) shows the actions of a deleted server, whose routing is gone:
        ask every region; the one that had it answers (nothing is re-routed)."""
        regions = await self.router.regions()
        results = await asyncio.gather(*(self.fwd.forward(call, r, "GET", call.rel, body=b"",
                                                          timeout=self.settings.list_timeout)
                                         for r in regions), return_exceptions=True)
        for region, result in zip(regions, results, strict=True):
            if isinstance(result, Reply) and result.status == 200:
                return self.fwd.render(call, result, region, spec)
        if any(not isinstance(r, Reply) for r in results):
            raise Fault(503, f"{spec.label} {resource_id} may be in a region that is unavailable.")
        raise Fault(404, f"{spec.label} {resource_id} could not be found.")

    async def _lookup(self, call: Call, spec: Routed, resource_id: str) -> str | None:
        """Ask every region for an unrouted id (only with lookup_unrouted)."""
        regions = await self.router.regions()
        results = await asyncio.gather(*(self.fwd.forward(call, r, "GET", call.rel_for(spec.list_key, resource_id),
                                                          timeout=self.settings.list_timeout, query="")
                                         for r in regions), return_exceptions=True)
        down = False
        for region, result in zip(regions, results, strict=True):
            if isinstance(result, Reply) and result.status == 200:
                self.router.adopt(spec.kind, [(resource_id, region, call.identity.project_id)])
                return region
            down = down or not isinstance(result, Reply)
        if down:
            raise Fault(503, f"{spec.label} {resource_id} may be in a region that is unavailable.")
        return None
