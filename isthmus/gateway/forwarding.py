"""Sending a call to one region and turning the region's reply into the gateway's.

Every handler reaches regions through this one place, so header hygiene, the
negotiated microversion, the client's request id, timeouts and the rewriting of
regional URLs and AZs hold for all of them.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict

from aiohttp import web

from isthmus.gateway import links, microversion, proxy
from isthmus.gateway.apis import Routed
from isthmus.gateway.call import Call, Settings, members
from isthmus.gateway.catalog import Catalog
from isthmus.gateway.faults import Fault
from isthmus.gateway.proxy import RegionUnavailable, Reply, Upstream
from isthmus.gateway.routing import Router

LOG = logging.getLogger(__name__)


MAX_REWRITERS = 64


class Forwarder:
    def __init__(self, settings: Settings, catalog: Catalog, upstream: Upstream, router: Router) -> None:
        self.settings = settings
        self.catalog = catalog
        self.upstream = upstream
        self.router = router
        # Keyed by the request's base URL (the Host header unless public_url is set):
        # bounded, least recently used out, so no client grows it with invented hosts.
        self._rewriters: OrderedDict[tuple, links.Rewriter] = OrderedDict()

    async def forward(self, call: Call, region: str, method: str, rel: str, *, body: bytes | None = None,
                      query: str | None = None, timeout: float | None = None,
                      unavailable: tuple[Routed, str] | None = None, stream: bool = False) -> Reply:
        """``method`` on ``rel`` (relative to the region's version endpoint) with the
        caller's token; an unreachable region is a 503 naming it (and the object)."""
        endpoint = await self.catalog.endpoint(call.api.name, region)
        if endpoint is None:
            raise Fault(503, f"Region {region} offers no {call.api.name} service.")
        url = f"{endpoint.url}/{rel}" if rel else endpoint.url + "/"
        qs = call.request.query_string if query is None else query
        if qs:
            url += "?" + qs
        headers = proxy.request_headers(call.request.headers)
        headers.update(microversion.forward_headers(call.api.mv, call.version))
        headers["X-OpenStack-Request-ID"] = call.global_request_id
        data = call.body if body is None else body
        try:
            return await self.upstream.request(region, method, url, headers, data,
                                               timeout or self.settings.request_timeout,
                                               stream_over=self.settings.stream_replies_over if stream else 0)
        except RegionUnavailable as err:
            self.catalog.invalidate()
            LOG.warning("%s: %s", call.request_id, err)
            if unavailable is not None:
                spec, rid = unavailable
                raise Fault(503, f"{spec.label} {rid} is in region {region}, which is unavailable.") from None
            raise Fault(503, f"Region {region} is unavailable.") from None

    def sick_regions(self) -> set[str]:
        """Regions with a service whose breaker is open (no new binding goes there)."""
        return {key.split(" ", 1)[0] for key, breaker in self.upstream.breakers().items() if breaker.open_for() > 0}

    def rewriter(self, call: Call) -> links.Rewriter:
        roots = tuple(sorted(ep.root for ep in self.catalog.endpoints_known(call.api.name)))
        key = (call.api.name, call.base, roots)
        rewriter = self._rewriters.get(key)
        if rewriter is None:
            rewriter = self._rewriters[key] = links.Rewriter(roots, call.base + call.api.prefix)
            while len(self._rewriters) > MAX_REWRITERS:
                self._rewriters.popitem(last=False)
        else:
            self._rewriters.move_to_end(key)
        return rewriter

    def render(self, call: Call, reply: Reply, region: str | None, spec: Routed | None = None) -> web.Response:
        """The region's reply as the gateway's: links and ``Location`` point at the
        gateway, faults name no regional host, routed objects show top-level AZs."""
        rewriter = self.rewriter(call)
        headers = proxy.response_headers(reply.headers)
        # The region's request id reaches the client: it is the one Nova records
        # (instance actions are looked up by it) and the one in the region's logs.
        for name in ("x-openstack-request-id", "x-compute-request-id"):
            if name in reply.headers:
                headers[name] = reply.headers[name]
        if "Location" in headers:
            headers["Location"] = rewriter.text(headers["Location"])
        if reply.stream is not None:  # large and successful: rewritten on the fly, sent chunked
            return web.Response(status=reply.status, body=rewriter.stream(reply.stream), headers=headers)
        body = rewriter.body(reply.body)
        if reply.status >= 400:
            body = links.hide_hosts(body.decode("utf-8", "replace"), self.catalog.all_hosts()).encode()
        elif spec is not None and spec.az_field and region and reply.is_json and body:
            body = self._top_az_body(body, spec, region)
        return web.Response(status=reply.status, body=body, headers=headers)

    def _top_az_body(self, body: bytes, spec: Routed, region: str) -> bytes:
        az = self.az_of.get(region)
        if not az:
            return body
        try:
            doc = json.loads(body)
        except ValueError:
            return body
        for item in members(doc, spec):
            for field in spec.az_fields:
                if item.get(field):  # a null pinned AZ stays null
                    item[field] = az
        return json.dumps(doc).encode()

    @property
    def az_of(self) -> dict[str, str]:
        """Region name -> its top-level availability zone."""
        return self.router.az_of_regions()
