"""Cinder attachments (``/attachments``, 3.27+) in the region of their volume.

A volume and the server it is attached to live in one region (Nova there talks
to its own Cinder). ``POST /attachments`` goes to the volume's region; with an
``instance_uuid`` the server must be in that region too (400 otherwise, as
``os-volume_attachments`` answers). An attachment is found by id in the region
that created it (remembered in-process), else by asking every region with the
caller's token (another gateway process, an attachment Nova made): a 404 from
every region is a 404, a region that is down is a 503, never a 404.
``GET /attachments`` lists every region's attachments, region after region (by
region name; Cinder's own filters and pagination apply within each region).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from dataclasses import dataclass

from aiohttp import web

from isthmus.gateway.call import Settings
from isthmus.gateway.faults import Fault
from isthmus.gateway.forwarding import Forwarder
from isthmus.gateway.routing import Router

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class AttachmentCreate:
    volume_id: str
    server_id: str | None


def attachment_create(body: bytes) -> AttachmentCreate:
    """The volume and server of ``POST /attachments``, validated (400 naming the field)."""
    try:
        doc = json.loads(body or b"null")
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python parses
        raise Fault(400, "Malformed request body.") from None
    attachment = doc.get("attachment") if isinstance(doc, dict) else None
    if not isinstance(attachment, dict):
        raise Fault(400, "Invalid input for field/attribute attachment: must be an object.")
    volume_id = attachment.get("volume_uuid")
    if not isinstance(volume_id, str) or not volume_id:
        raise Fault(400, f"Invalid input for field/attribute attachment.volume_uuid: {volume_id!r} is not a volume id.")
    server_id = attachment.get("instance_uuid")
    if server_id is not None and (not isinstance(server_id, str) or not server_id):
        raise Fault(400, f"Invalid input for field/attribute attachment.instance_uuid: {server_id!r} is not a "
                         f"server id.")
    return AttachmentCreate(volume_id, server_id)


def same_region(volume_id: str, volume_region: str | None, server_id: str | None,
                server_region: str | None) -> str:
    """The region an attachment goes to; 404 for an unknown volume or server, 400
    when they live in different regions."""
    if volume_region is None:
        raise Fault(404, f"Volume {volume_id} could not be found.")
    if server_id is not None:
        if server_region is None:
            raise Fault(404, f"Instance {server_id} could not be found.")
        if server_region != volume_region:
            raise Fault(400, f"Server {server_id} and volume {volume_id} are not in the same region.")
    return volume_region


class Attachments:
    def __init__(self, settings: Settings, router: Router, fwd: Forwarder, cache_size: int = 10_000) -> None:
        self.settings = settings
        self.router = router
        self.fwd = fwd
        self._region_of: OrderedDict[str, str] = OrderedDict()
        self._cache_size = cache_size

    def _remember(self, attachment_id: str, region: str) -> None:
        self._region_of[attachment_id] = region
        self._region_of.move_to_end(attachment_id)
        while len(self._region_of) > self._cache_size:
            self._region_of.popitem(last=False)

    async def handle(self, call) -> web.StreamResponse:
        segs, method = call.segments, call.method
        if len(segs) == 1 and method == "POST":
            return await self._create(call)
        if (len(segs) == 1 or (len(segs) == 2 and segs[1] == "detail")) and method == "GET":
            return await self._list(call)
        if len(segs) == 1:
            raise Fault(405, "Method not allowed.")
        attachment_id = segs[1]
        region = self._region_of.get(attachment_id) or await self._find(call, attachment_id)
        reply = await self.fwd.forward(call, region, method, call.rel)
        if method == "DELETE" and 200 <= reply.status < 300:
            self._region_of.pop(attachment_id, None)
        return self.fwd.render(call, reply, region)

    async def _create(self, call) -> web.StreamResponse:
        wanted = attachment_create(call.body)
        router = self.router
        volume_region = await router.region_of("volume", wanted.volume_id)
        server_region = await router.region_of("server", wanted.server_id) if wanted.server_id else None
        if volume_region and server_region and volume_region != server_region:
            # Name the other region only to a caller who may see both (else a 404, as
            # the region would answer a stranger).
            if not await router.visible_to("volume", wanted.volume_id, call.identity):
                volume_region = None
            elif not await router.visible_to("server", str(wanted.server_id), call.identity):
                server_region = None
        region = same_region(wanted.volume_id, volume_region, wanted.server_id, server_region)
        reply = await self.fwd.forward(call, region, "POST", call.rel)
        if 200 <= reply.status < 300 and reply.is_json:
            made = ((reply.json() or {}).get("attachment") or {}).get("id")
            if made:
                self._remember(made, region)
        return self.fwd.render(call, reply, region)

    async def _find(self, call, attachment_id: str) -> str:
        regions = await self.router.regions()
        path = call.rel_for("attachments", attachment_id)
        replies = await asyncio.gather(*(self.fwd.forward(call, r, "GET", path, body=b"", query="",
                                                                  timeout=self.settings.list_timeout)
                                         for r in regions), return_exceptions=True)
        down = []
        for region, reply in zip(regions, replies, strict=True):
            if isinstance(reply, BaseException):
                down.append(region)
            elif reply.status == 200:
                self._remember(attachment_id, region)
                return region
        if down:
            raise Fault(503, f"Attachment {attachment_id} may be in region(s) {', '.join(down)}, unavailable.")
        raise Fault(404, f"Attachment {attachment_id} could not be found.")

    async def _list(self, call) -> web.StreamResponse:
        regions = await self.router.regions()
        replies = await asyncio.gather(*(self.fwd.forward(call, r, "GET", call.rel, body=b"",
                                                                  timeout=self.settings.list_timeout)
                                         for r in regions), return_exceptions=True)
        items: list[dict] = []
        for region, reply in zip(regions, replies, strict=True):
            if isinstance(reply, BaseException) or reply.status >= 500:
                LOG.warning("%s: attachments of %s skipped (unavailable)", call.request_id, region)
                if self.settings.strict_lists:
                    raise Fault(503, f"Region {region} unavailable; the list would be incomplete.")
                continue
            if reply.status != 200:
                return self.fwd.render(call, reply, region)  # the caller's error (400, 403)
            for item in (reply.json() or {}).get("attachments") or []:
                if isinstance(item, dict) and item.get("id"):
                    self._remember(item["id"], region)
                    items.append(item)
        text = self.fwd.rewriter(call).text(json.dumps({"attachments": items}))
        return web.Response(status=200, body=text.encode(), content_type="application/json")
