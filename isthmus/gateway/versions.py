"""Version documents and the microversion range the gateway offers: the
intersection of every region's range, probed from each region's version
document and cached like the catalog."""

from __future__ import annotations

import asyncio
import json
import logging
import time

from aiohttp import web

from isthmus.gateway import microversion
from isthmus.gateway.apis import COMPUTE, VOLUME, Api
from isthmus.gateway.call import Settings, json_response
from isthmus.gateway.catalog import Catalog, version_entry, version_range
from isthmus.gateway.faults import Fault
from isthmus.gateway.proxy import RegionUnavailable, Upstream

LOG = logging.getLogger(__name__)

VERSION_UPDATED = {"compute": "2013-07-23T11:33:21Z", "volume": "2016-02-08T12:20:21Z"}
# Cinder's entries link its API reference before the self link (Nova's root shows none).
DESCRIBED_BY = {"volume": [{"rel": "describedby", "type": "text/html", "href": "https://docs.openstack.org/"}]}
MEDIA_TYPES = {
    "compute": [{"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2.1"}],
    "volume": [{"base": "application/json", "type": "application/vnd.openstack.volume+json;version=3"}],
}


class Versions:
    def __init__(self, settings: Settings, catalog: Catalog, upstream: Upstream) -> None:
        self.settings = settings
        self.catalog = catalog
        self.upstream = upstream
        self._ranges: dict[str, tuple[float, dict[str, microversion.Range]]] = {}
        self._probing: dict[str, asyncio.Lock] = {}
        self._refreshing: dict[str, asyncio.Task] = {}
        # The regions' "updated" of the version (the release's date, not a constant).
        self._updated: dict[str, str] = {}

    async def supported(self, api: Api) -> microversion.Range:
        """The intersection of every region's range (cached like the catalog). Only
        the first probe is waited for; later ones refresh in the background while
        requests use the last known ranges, so a hung region's probe timeout is
        never added to a request."""
        at, ranges = self._ranges.get(api.name, (float("-inf"), {}))
        if not ranges:
            ranges = await self._probe_ranges(api)
        elif time.monotonic() - at > self.settings.catalog_ttl:
            running = self._refreshing.get(api.name)
            if running is None or running.done():
                self._refreshing[api.name] = asyncio.get_running_loop().create_task(self._probe_ranges(api))
        default = microversion.Range(api.mv.default, api.mv.default)
        return microversion.intersect(ranges.values()) or default

    async def _probe_ranges(self, api: Api) -> dict[str, microversion.Range]:
        """One probe of every region at a time per API (single flight): requests
        arriving meanwhile wait for its result instead of probing again."""
        lock = self._probing.setdefault(api.name, asyncio.Lock())
        async with lock:
            at, ranges = self._ranges.get(api.name, (float("-inf"), {}))
            if time.monotonic() - at <= self.settings.catalog_ttl and ranges:
                return ranges
            ranges = dict(ranges)
            endpoints = await self.catalog.endpoints(api.name)

            async def probe(region: str, root: str) -> None:
                try:
                    reply = await self.upstream.request(region, "GET", root + "/", {"Accept": "application/json"},
                                                        None, self.settings.list_timeout)
                    doc = json.loads(reply.body or b"{}")
                    found = version_range(doc, api.name)
                    if found:
                        ranges[region] = found
                        updated = (version_entry(doc, api.name) or {}).get("updated")
                        if updated:
                            self._updated[api.name] = updated
                except (RegionUnavailable, ValueError) as err:
                    LOG.warning("microversions of %s in %s: %s (keeping last known)", api.name, region, err)

            await asyncio.gather(*(probe(r, ep.root) for r, ep in endpoints.items()))
            self._ranges[api.name] = (time.monotonic() if ranges else float("-inf"), ranges)
            return ranges

    def _entry(self, api: Api, supported: microversion.Range, base: str) -> dict:
        return {
            "id": "v2.1" if api is COMPUTE else "v3.0", "status": "CURRENT",
            "version": microversion.fmt(supported.max), "min_version": microversion.fmt(supported.min),
            "updated": self._updated.get(api.name, VERSION_UPDATED[api.name]),
            "links": [*DESCRIBED_BY.get(api.name, []),
                      {"rel": "self", "href": f"{base}{api.prefix}/{api.version_segment}/"}],
            "media-types": MEDIA_TYPES[api.name],
        }

    async def root(self, request: web.Request, api: Api, base: str) -> web.Response:
        """``GET /``: unauthenticated, as in Nova and Cinder."""
        if request.method not in ("GET", "HEAD"):
            raise Fault(api.root_bad_method, "Not found." if api.root_bad_method == 404 else "Method not allowed.")
        return json_response({"versions": [self._entry(api, await self.supported(api), base)]}, api.root_status)

    async def document(self, request: web.Request, api: Api, base: str) -> web.Response:
        """``GET /v2.1/`` (``/v3/``): the one version's document."""
        if request.method not in ("GET", "HEAD"):
            raise Fault(api.root_bad_method, "Method not allowed.")
        entry = self._entry(api, await self.supported(api), base)
        # Cinder answers ``GET /v3/`` with the same list as its root (one entry), Nova
        # with the one version.
        return json_response({"versions": [entry]} if api is VOLUME else {"version": entry})
