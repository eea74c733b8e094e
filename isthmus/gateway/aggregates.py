"""``os-aggregates``: a read-only view of every region's host aggregates.

Aggregates are regional (hosts belong to one region) and their integer ids
collide across regions, so each gets a number of its own at the gateway: the id
of its routing row (kind ``aggregate``, top = the aggregate's uuid, bottom = its
regional id), stable and shared by every gateway process. Every call uses the
caller's token, so Nova's policy decides (a non-admin gets Nova's 403 from the
master region). Writes are refused (405): aggregates are managed in each region.
A regional AZ name in an aggregate is shown as its top-level AZ, as for servers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from typing import Any

from aiohttp import web

from isthmus.gateway.apis import COMPUTE
from isthmus.gateway.call import Settings
from isthmus.gateway.faults import Fault, integer_at_least
from isthmus.gateway.forwarding import Forwarder
from isthmus.gateway.routing import Router
from isthmus.gateway.versions import Versions
from isthmus.registry import Pod

LOG = logging.getLogger(__name__)

KIND = "aggregate"
UUID_VERSION = (2, 41)  # aggregates show their uuid from here on


def identity_of(region: str, aggregate: dict) -> str:
    """What names an aggregate across regions: its uuid, else region and regional id."""
    return str(aggregate.get("uuid") or f"{region}/{aggregate['id']}")


def shown(aggregate: dict, number: int, pod: Pod | None, with_uuid: bool) -> dict:
    """The aggregate as the gateway shows it: its gateway number, top-level AZ."""
    out = dict(aggregate, id=number)
    if not with_uuid:
        out.pop("uuid", None)
    if pod is not None and pod.pod_az_name and pod.az_name:
        if out.get("availability_zone") == pod.pod_az_name:
            out["availability_zone"] = pod.az_name
        metadata = out.get("metadata")
        if isinstance(metadata, dict) and metadata.get("availability_zone") == pod.pod_az_name:
            out["metadata"] = dict(metadata, availability_zone=pod.az_name)
    return out


def gateway_number(raw: str) -> int:
    """The aggregate id of a URL (400 naming it when it is not a number)."""
    refusal = f"Invalid input for field/attribute id: {raw!r} is not an aggregate id."
    return integer_at_least(raw, 1, refusal, refusal)


class Aggregates:
    def __init__(self, settings: Settings, router: Router, fwd: Forwarder, versions: Versions) -> None:
        self.settings = settings
        self.router = router
        self.fwd = fwd
        self.versions = versions
        self._numbers: dict[tuple[str, str], int] = {}  # (region, identity) -> gateway number

    async def handle(self, call) -> web.StreamResponse:
        segs = call.segments
        try:
            if call.method != "GET" or len(segs) > 2:
                await self._may_read(call)
                raise Fault(405, "Aggregates are a read-only view at the gateway: manage them in each region.")
            if len(segs) == 1:
                return await self._list(call)
            return await self._show(call, gateway_number(segs[1]))
        except _Rendered as done:
            return done.response

    async def _may_read(self, call) -> None:
        """Nova's own answer (403 for a non-admin) when the caller may not read aggregates."""
        master = await self.router.master_region()
        reply = await self.fwd.forward(call, master, "GET", call.rel_for("os-aggregates"), body=b"", query="")
        if reply.status != 200:
            raise _Rendered(self.fwd.render(call, reply, master))

    def _uuid_call(self, call, supported) -> Any:
        if call.version < UUID_VERSION and UUID_VERSION in supported:
            return dataclasses.replace(call, version=UUID_VERSION)
        return call

    async def _number(self, region: str, aggregate: dict) -> int:
        key = (region, identity_of(region, aggregate))
        if key not in self._numbers:
            row = await self.router.ensure_copy(KIND, key[1], str(aggregate["id"]), region)
            self._numbers[key] = row.id
        return self._numbers[key]

    async def _list(self, call) -> web.StreamResponse:
        await self._may_read(call)
        router = self.router
        asked = self._uuid_call(call, await self.versions.supported(COMPUTE))
        regions = await router.regions()
        replies = await asyncio.gather(*(self.fwd.forward(asked, r, "GET", call.rel_for("os-aggregates"),
                                                                  body=b"", query="",
                                                                  timeout=self.settings.list_timeout)
                                         for r in regions), return_exceptions=True)
        items: list[dict] = []
        for region, reply in zip(regions, replies, strict=True):
            if isinstance(reply, BaseException) or reply.status != 200:
                LOG.warning("%s: aggregates of %s skipped (%s)", call.request_id, region,
                            getattr(reply, "status", reply))
                if self.settings.strict_lists:
                    raise Fault(503, f"Region {region} unavailable; the list would be incomplete.")
                continue
            pod = await router.pod(region)
            for aggregate in (reply.json() or {}).get("aggregates") or []:
                number = await self._number(region, aggregate)
                items.append(shown(aggregate, number, pod, call.version >= UUID_VERSION))
        return _json({"aggregates": items})

    async def _show(self, call, number: int) -> web.StreamResponse:
        row = await self.router.routing(number)
        regions = {p.pod_id: p for p in await self.router.pods()}
        if row is None or row.resource_type != KIND or row.pod_id not in regions:
            await self._may_read(call)  # a non-admin gets Nova's 403, never a 404
            raise Fault(404, f"Aggregate {number} could not be found.")
        pod = regions[row.pod_id]
        reply = await self.fwd.forward(call, pod.region_name, "GET",
                                               call.rel_for("os-aggregates", str(row.bottom_id)), body=b"", query="")
        if reply.status == 404:  # its regional id must not show
            raise Fault(404, f"Aggregate {number} could not be found.")
        if reply.status != 200:
            return self.fwd.render(call, reply, pod.region_name)
        aggregate = (reply.json() or {}).get("aggregate") or {}
        return _json({"aggregate": shown(aggregate, number, pod, call.version >= UUID_VERSION)})


class _Rendered(Exception):
    """A region's own answer, to be returned as it is."""

    def __init__(self, response: web.Response) -> None:
        super().__init__(response.status)
        self.response = response


def _json(doc: dict) -> web.Response:
    return web.Response(status=200, body=json.dumps(doc).encode(), content_type="application/json")
