"""The gateway's request handling (aiohttp)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from multidict import MultiDict

from isthmus.gateway import faults, links, listing, microversion, proxy
from isthmus.gateway.apis import APIS, COMPUTE, VOLUME, Api, Routed
from isthmus.gateway.auth import Identity, Unauthorized
from isthmus.gateway.catalog import Catalog, version_range
from isthmus.gateway.faults import Fault
from isthmus.gateway.pools import BoundedPool
from isthmus.gateway.proxy import RegionUnavailable, Reply, Upstream
from isthmus.gateway.routing import Router

LOG = logging.getLogger(__name__)

_PROJECT_ID = re.compile(r"^[0-9a-fA-F]{32}$|^[0-9a-fA-F-]{36}$")
_REQUEST_ID = re.compile(r"^req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
VERSION_UPDATED = {"compute": "2013-07-23T11:33:21Z", "volume": "2016-02-08T12:20:21Z"}
MEDIA_TYPES = {
    "compute": [{"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2.1"}],
    "volume": [{"base": "application/json", "type": "application/vnd.openstack.volume+json;version=3"}],
}


@dataclass
class Settings:
    public_url: str | None = None
    list_timeout: float = 10.0
    request_timeout: float = 120.0
    strict_lists: bool = False
    max_limit: int = 1000
    lookup_unrouted: bool = False
    catalog_ttl: float = 300.0
    # Nova's and Cinder's own bound (oslo.middleware sizelimit, 112 KiB); a larger
    # body is a 413 here, never read whole.
    max_request_body: int = 114688
    quota_unreachable_region: str = "last_known"  # or "refuse" (see config)


@dataclass
class Call:
    """One client request after authentication and path parsing."""

    request: web.Request
    api: Api
    identity: Identity
    version: microversion.Version
    project: str | None  # project segment of the URL, if any
    segments: list[str]  # path after the version (and project) segment
    body: bytes
    request_id: str
    global_request_id: str
    base: str  # gateway base URL for links

    @property
    def method(self) -> str:
        return self.request.method

    @property
    def rel(self) -> str:
        """Path relative to a region's version endpoint, project segment included."""
        parts = ([self.project] if self.project else []) + self.segments
        # A trailing slash goes on as sent: the region decides what it means (issue 17:
        # dropping it turned Nova's 404 for POST /flavors/ into a parse of the body).
        slash = "/" if parts and self.request.path.endswith("/") else ""
        return "/".join(parts) + slash

    def rel_for(self, *segments: str) -> str:
        return "/".join(([self.project] if self.project else []) + list(segments))


Hook = Callable[[Call, str, Reply], Awaitable[None]]


class Gateway:
    def __init__(self, settings: Settings, router: Router, catalog: Catalog, upstream: Upstream,
                 validator, jobs=None) -> None:
        self.settings = settings
        self.router = router
        self.catalog = catalog
        self.upstream = upstream
        self.validator = validator
        self.cursors = listing.CursorCache()
        self._ranges: dict[str, tuple[float, dict[str, microversion.Range]]] = {}
        self._creates: OrderedDict[tuple, tuple[float, asyncio.Future]] = OrderedDict()
        self._rewriters: dict[tuple, links.Rewriter] = {}
        # Global objects: (api, collection) -> hooks run after a successful write at the master.
        self.write_hooks: dict[tuple[str, str], list[Hook]] = {}
        # Server create: coroutines run before forwarding (e.g. image replication, quota).
        self.before_create: list[Callable[[Call, Routed, str, dict], Awaitable[None]]] = []
        # (api name, region, path) -> whether the object is gone, asked with service
        # credentials: a 404 through the caller's token may only mean "not yours".
        self.confirm_absent: Callable[[str, str, str], Awaitable[bool]] | None = None
        # Slow blocking work (image copies, inline syncs, service checks), bounded
        # and apart from token validation (pools.py).
        self.background = BoundedPool(8, "gateway-work")
        self._probing: dict[str, asyncio.Lock] = {}
        self.local_handlers: dict[tuple[str, str], Callable[[Call], Awaitable[web.Response]]] = {
            ("compute", "os-availability-zone"): self._availability_zones,
            ("volume", "os-availability-zone"): self._availability_zones,
        }

    # --- aiohttp plumbing ----------------------------------------------------------
    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=self.settings.max_request_body)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_startup.append(self._startup)
        app.on_cleanup.append(self._cleanup)
        return app

    async def _startup(self, _app) -> None:
        await self.upstream.start()

    async def _cleanup(self, _app) -> None:
        await self.router.drain()
        await self.upstream.close()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        request_id = f"req-{uuid.uuid4()}"
        started = time.monotonic()
        api: Api | None = None
        version: microversion.Version | None = None
        try:
            response, api, version = await self._dispatch(request, request_id)
        except Fault as fault:
            response = faults.response(fault.status, fault.message, fault.headers)
        except Unauthorized as err:
            response = web.Response(status=err.status, body=err.body, headers=dict(err.headers))
        except Exception:  # noqa: BLE001 - never leak a traceback or a regional URL
            LOG.exception("%s %s %s failed", request_id, request.method, request.path)
            response = faults.response(500, "The gateway failed to handle the request.")
        response.headers["x-openstack-request-id"] = request_id
        if api is COMPUTE:
            response.headers["x-compute-request-id"] = request_id
        if api is not None and version is not None:
            response.headers.update(microversion.response_headers(api.mv, version))
        LOG.info("%s %s %s -> %d in %.3fs", request_id, request.method, request.path_qs, response.status,
                 time.monotonic() - started)
        return response

    def _base(self, request: web.Request) -> str:
        if self.settings.public_url:
            return self.settings.public_url.rstrip("/")
        return f"{request.scheme}://{request.host}"

    async def _dispatch(self, request: web.Request, request_id: str):
        path = request.path
        base = self._base(request)
        if path.rstrip("/") in ("", COMPUTE.prefix):
            return await self._versions(request, COMPUTE, base), None, None
        if path.rstrip("/") == VOLUME.prefix:
            return await self._versions(request, VOLUME, base), None, None
        api, rest = _match_api(path)
        if api is None:
            raise Fault(404, "Not found.")
        if not rest:
            return await self._version_doc(request, api, base), None, None
        supported = await self.supported(api)
        try:
            version = microversion.requested(request.headers, api.mv, supported)
        except microversion.BadVersion as err:
            raise Fault(406, str(err)) from None
        identity = await self.validator.validate(request.headers)
        if any(s in (".", "..") for s in rest):
            # No resource has such a name; forwarded, the URL would resolve it to
            # another one (PATCH /os-keypairs/.. became PATCH /v2.1/ in the region).
            raise Fault(404, "Not found.")
        project, segments = _split_project(api, rest)
        if project and project != identity.project_id and not identity.is_admin:
            raise Fault(403, f"Project {project} is not the project of the token.")
        inbound_rid = request.headers.get("X-OpenStack-Request-ID", "")
        call = Call(request, api, identity, version, project, segments, await _read_body(request), request_id,
                    inbound_rid if _REQUEST_ID.match(inbound_rid) else request_id, base)
        return await self._route(call), api, version

    # --- versions --------------------------------------------------------------------
    async def supported(self, api: Api) -> microversion.Range:
        """The intersection of every region's range (cached like the catalog)."""
        at, ranges = self._ranges.get(api.name, (float("-inf"), {}))
        if time.monotonic() - at > self.settings.catalog_ttl or not ranges:
            ranges = await self._probe_ranges(api)
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
                    found = version_range(json.loads(reply.body or b"{}"), api.name)
                    if found:
                        ranges[region] = found
                except (RegionUnavailable, ValueError) as err:
                    LOG.warning("microversions of %s in %s: %s (keeping last known)", api.name, region, err)

            await asyncio.gather(*(probe(r, ep.root) for r, ep in endpoints.items()))
            self._ranges[api.name] = (time.monotonic() if ranges else float("-inf"), ranges)
            return ranges

    def _version_entry(self, api: Api, supported: microversion.Range, base: str) -> dict:
        return {
            "id": "v2.1" if api is COMPUTE else "v3.0", "status": "CURRENT",
            "version": microversion.fmt(supported.max), "min_version": microversion.fmt(supported.min),
            "updated": VERSION_UPDATED[api.name],
            "links": [{"rel": "self", "href": f"{base}{api.prefix}/{api.version_segment}/"}],
            "media-types": MEDIA_TYPES[api.name],
        }

    async def _versions(self, request: web.Request, api: Api, base: str) -> web.Response:
        """``GET /``: unauthenticated, as in Nova and Cinder."""
        if request.method not in ("GET", "HEAD"):
            raise Fault(api.root_bad_method, "Not found." if api.root_bad_method == 404 else "Method not allowed.")
        return _json({"versions": [self._version_entry(api, await self.supported(api), base)]})

    async def _version_doc(self, request: web.Request, api: Api, base: str) -> web.Response:
        if request.method not in ("GET", "HEAD"):
            raise Fault(api.root_bad_method, "Method not allowed.")
        entry = self._version_entry(api, await self.supported(api), base)
        return _json({"version": entry})

    # --- routing -----------------------------------------------------------------------
    async def _route(self, call: Call) -> web.StreamResponse:
        api, segs = call.api, call.segments
        if not segs:
            return await self._version_doc(call.request, api, call.base)
        collection = segs[0]
        local = self.local_handlers.get((api.name, collection))
        if local is not None:
            return await local(call)
        spec = api.routed.get(collection)
        if spec is not None:
            return await self._routed(call, spec)
        if api is COMPUTE and collection == "os-server-external-events":
            return await self._external_events(call)
        return await self.to_master(call)

    async def to_master(self, call: Call) -> web.StreamResponse:
        """Global objects and everything else: the master region (then write hooks)."""
        api, collection = call.api, call.segments[0]
        region = await self.router.master_region()
        reply = await self._forward(call, region, call.method, call.rel)
        if 200 <= reply.status < 300 and call.method in ("POST", "PUT", "DELETE", "PATCH"):
            for hook in self.write_hooks.get((api.name, collection), []):
                try:
                    await hook(call, region, reply)
                except Exception:  # noqa: BLE001 - propagation retries by itself
                    LOG.exception("%s: write hook for %s failed", call.request_id, collection)
        return self._render(call, reply, region)

    async def _routed(self, call: Call, spec: Routed) -> web.StreamResponse:
        segs = call.segments
        if len(segs) == 1 or (len(segs) == 2 and segs[1] == "detail"):
            if call.method == "GET":
                return await self._list(call, spec, detail=len(segs) == 2)
            if call.method == "POST" and len(segs) == 1:
                return await self._create(call, spec)
            raise Fault(405, "Method not allowed.")
        resource_id = segs[1]
        region = await self.router.region_of(spec.kind, resource_id)
        if region is None and self.settings.lookup_unrouted:
            region = await self._lookup(call, spec, resource_id)
        if region is None:
            raise Fault(404, f"{spec.label} {resource_id} could not be found.")
        if spec.kind == "server" and len(segs) == 3 and segs[2] == "os-volume_attachments" and call.method == "POST":
            await self._check_attach(call, region)
        reply = await self._forward(call, region, call.method, call.rel, unavailable=(spec, resource_id))
        if reply.status == 404 and len(segs) == 2 and call.method in ("GET", "PUT", "DELETE"):
            await self._forget_if_gone(call, spec, resource_id, region)
        return self._render(call, reply, region, spec)

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
        volume_region = await self.router.region_of("volume", str(volume_id))
        if volume_region is None:
            raise Fault(404, f"Volume {volume_id} could not be found.")
        if volume_region != server_region:
            raise Fault(400, f"Server and volume {volume_id} are not in the same region.")

    async def _lookup(self, call: Call, spec: Routed, resource_id: str) -> str | None:
        """Ask every region for an unrouted id (only with lookup_unrouted)."""
        regions = await self.router.regions()
        results = await asyncio.gather(*(self._forward(call, r, "GET", call.rel_for(spec.list_key, resource_id),
                                                       timeout=self.settings.list_timeout, query="")
                                         for r in regions), return_exceptions=True)
        down = False
        for region, result in zip(regions, results):
            if isinstance(result, Reply) and result.status == 200:
                self.router.adopt(spec.kind, [(resource_id, region, call.identity.project_id)])
                return region
            down = down or not isinstance(result, Reply)
        if down:
            raise Fault(503, f"{spec.label} {resource_id} may be in a region that is unavailable.")
        return None

    # --- forwarding ------------------------------------------------------------------
    async def _forward(self, call: Call, region: str, method: str, rel: str, *, body: bytes | None = None,
                       query: str | None = None, timeout: float | None = None,
                       unavailable: tuple[Routed, str] | None = None) -> Reply:
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
                                               timeout or self.settings.request_timeout)
        except RegionUnavailable as err:
            self.catalog.invalidate()
            LOG.warning("%s: %s", call.request_id, err)
            if unavailable is not None:
                spec, rid = unavailable
                raise Fault(503, f"{spec.label} {rid} is in region {region}, which is unavailable.") from None
            raise Fault(503, f"Region {region} is unavailable.") from None

    def _rewriter(self, call: Call) -> links.Rewriter:
        roots = tuple(sorted(ep.root for ep in self.catalog._endpoints.get(call.api.name, {}).values()))
        key = (call.api.name, call.base, roots)
        rewriter = self._rewriters.get(key)
        if rewriter is None:
            rewriter = self._rewriters[key] = links.Rewriter(roots, call.base + call.api.prefix)
        return rewriter

    def _render(self, call: Call, reply: Reply, region: str | None, spec: Routed | None = None) -> web.Response:
        rewriter = self._rewriter(call)
        headers = proxy.response_headers(reply.headers)
        if "Location" in headers:
            headers["Location"] = rewriter.text(headers["Location"])
        body = rewriter.body(reply.body)
        if reply.status >= 400:
            body = links.hide_hosts(body.decode("utf-8", "replace"), self.catalog.all_hosts()).encode()
        elif spec is not None and spec.az_field and region and reply.is_json and body:
            body = self._top_az_body(body, spec, region)
        return web.Response(status=reply.status, body=body, headers=headers)

    def _top_az_body(self, body: bytes, spec: Routed, region: str) -> bytes:
        az = self._az_of.get(region)
        if not az:
            return body
        try:
            doc = json.loads(body)
        except ValueError:
            return body
        for item in _members(doc, spec):
            if spec.az_field in item:
                item[spec.az_field] = az
        return json.dumps(doc).encode()

    @property
    def _az_of(self) -> dict[str, str]:
        return {p.region_name: p.az_name for p in self.router._pods}

    # --- create ----------------------------------------------------------------------
    async def _create(self, call: Call, spec: Routed) -> web.StreamResponse:
        try:
            doc = json.loads(call.body or b"null")
        except (ValueError, RecursionError):  # RecursionError: nested deeper than Python parses
            raise Fault(400, "Malformed request body.") from None
        obj = doc.get(spec.singular) if isinstance(doc, dict) else None
        if not isinstance(obj, dict):
            raise Fault(400, f"The request body must contain a '{spec.singular}' object.")
        body = call.body
        if spec.placement == "schedule":
            requested = obj.get("availability_zone")
            if requested is not None and not isinstance(requested, str):
                raise Fault(400, f"Invalid input for field/attribute {spec.singular}.availability_zone: "
                                 f"{requested!r} is not a string.")
            zone, sep, host = (requested or "").partition(":")
            pod = await self.router.choose(call.identity.project_id, zone or None)
            region = pod.region_name
            if requested and zone != pod.pod_az_name:
                if pod.pod_az_name:
                    obj["availability_zone"] = pod.pod_az_name + sep + host
                elif sep:
                    obj["availability_zone"] = sep + host  # ":host" keeps an admin's host pin
                else:
                    del obj["availability_zone"]
                body = json.dumps(doc).encode()
        else:
            volume_id = obj.get(spec.volume_field)
            region = await self.router.region_of("volume", str(volume_id)) if volume_id else None
            if region is None:
                raise Fault(404 if volume_id else 400,
                            f"Volume {volume_id} could not be found." if volume_id else f"{spec.volume_field} is required.")
        for check in self.before_create:
            await check(call, spec, region, obj)
        reply = await self._deduplicated(call, spec, region, body)
        return self._render(call, reply, region, spec)

    async def _deduplicated(self, call: Call, spec: Routed, region: str, body: bytes) -> Reply:
        """Identical creates under one client request id share one upstream create (§33)."""
        inbound = call.request.headers.get("X-OpenStack-Request-ID")
        if not inbound:
            return await self._create_in(call, spec, region, body)
        key = (call.identity.project_id, call.api.name, spec.kind, inbound, hashlib.sha256(call.body).hexdigest())
        now = time.monotonic()
        while self._creates and now - next(iter(self._creates.values()))[0] > 600:
            self._creates.popitem(last=False)
        if key in self._creates:
            return await asyncio.shield(self._creates[key][1])
        future = asyncio.get_running_loop().create_task(self._create_in(call, spec, region, body))
        self._creates[key] = (now, future)
        try:
            return await asyncio.shield(future)
        except Exception:
            self._creates.pop(key, None)
            raise

    async def _create_in(self, call: Call, spec: Routed, region: str, body: bytes) -> Reply:
        reply = await self._forward(call, region, "POST", call.rel, body=body)
        if not 200 <= reply.status < 300 or not reply.is_json:
            return reply
        created = (reply.json() or {}).get(spec.singular) or {}
        resource_id = created.get("id")
        if not resource_id:
            return reply  # e.g. return_reservation_id: members are adopted when listed
        for attempt in range(3):
            try:
                await self.router.record(spec.kind, resource_id, region, call.identity.project_id)
                return reply
            except Exception as err:  # noqa: BLE001
                LOG.warning("%s: recording %s %s (attempt %d): %s", call.request_id, spec.kind, resource_id,
                            attempt + 1, err)
                await asyncio.sleep(0.2 * (attempt + 1))
        # No routing means an invisible resource: undo the create rather than orphan it.
        LOG.error("%s: %s %s in %s has no routing; deleting it", call.request_id, spec.kind, resource_id, region)
        try:
            await self._forward(call, region, "DELETE", call.rel_for(spec.list_key, resource_id), body=b"", query="")
        except Fault:
            LOG.error("%s: compensating delete of %s %s failed; it will be adopted when listed",
                      call.request_id, spec.kind, resource_id)
        raise Fault(500, f"The {spec.label.lower()} could not be recorded; the create was undone.")

    # --- lists -------------------------------------------------------------------------
    async def _list(self, call: Call, spec: Routed, detail: bool) -> web.StreamResponse:
        query = MultiDict(call.request.query)
        limit = self._limit(query.get("limit"))
        marker = query.get("marker")
        try:
            sort = call.api.sort({k: query.getall(k) for k in ("sort_key", "sort_dir", "sort") if k in query})
        except listing.InvalidSort as err:
            raise Fault(400, str(err)) from None
        regions = await self.router.regions()
        # Every region is asked for the exact order the gateway merges on.
        base_pairs = [(k, v) for k, v in query.items() if k not in ("limit", "marker", "sort", "sort_key", "sort_dir")]
        base_pairs += call.api.sort_params(sort)
        zone = query.get("availability_zone")
        if zone is not None:
            regions = [r for r in regions if r in await self.router.regions_in_az(zone)]
            pods = {p.region_name: p for p in await self.router.pods()}
            base_pairs = [(k, v) for k, v in base_pairs if k != "availability_zone"]
        else:
            pods = {}
        key = listing.sort_key(sort)
        scope = (call.api.name, spec.kind, call.identity.project_id, call.identity.is_admin, call.project,
                 tuple(sorted(base_pairs)))
        start: dict[str, str | None] = {r: None for r in regions}
        cursor = None
        if marker:
            cursor = self.cursors.get(scope, marker) or await self._cursor_for(call, spec, marker, key)
            start.update({r: m for r, m in cursor.markers.items() if r in start})
        down: list[str] = []
        client_error: list[Reply] = []

        def fetcher(region: str):
            async def fetch(region_marker: str | None, n: int) -> tuple[list[dict], bool]:
                pairs = list(base_pairs)
                if zone is not None and pods.get(region) and pods[region].pod_az_name:
                    pairs.append(("availability_zone", pods[region].pod_az_name))
                pairs.append(("limit", str(n)))
                if region_marker:
                    pairs.append(("marker", region_marker))
                try:
                    reply = await self._forward(call, region, "GET", call.rel_for(spec.list_key, "detail"),
                                                query=urlencode(pairs), body=b"", timeout=self.settings.list_timeout)
                except Fault:
                    down.append(region)
                    return [], False
                if reply.status == 400 and region_marker:
                    raise listing.MarkerLost(region_marker)
                if 400 <= reply.status < 500:
                    client_error.append(reply)
                    return [], False
                if reply.status != 200:
                    LOG.warning("%s: %s answered %d to a list", call.request_id, region, reply.status)
                    down.append(region)
                    return [], False
                data = reply.json() or {}
                items = data.get(spec.list_key) or []
                more = len(items) >= n or any(l.get("rel") == "next" for l in data.get(f"{spec.list_key}_links") or [])
                return items, more
            return fetch

        streams = [listing.RegionStream(r, fetcher(r), page_size=min(limit + 1, self.settings.max_limit),
                                        marker=start[r], after=cursor.after if cursor else None, key=key,
                                        exact=cursor.stream_is_exact(r) if cursor else True)
                   for r in regions]
        await asyncio.gather(*(s.prime() for s in streams))
        page, more = await listing.merge(streams, key, limit)
        if client_error:
            return self._render(call, client_error[0], None)
        if down:
            LOG.warning("%s: list of %s skipped unavailable region(s) %s", call.request_id, spec.list_key,
                        ", ".join(sorted(set(down))))
            if self.settings.strict_lists:
                raise Fault(503, f"Region(s) {', '.join(sorted(set(down)))} unavailable; the list would be incomplete.")
        self.router.adopt(spec.kind, [(item["id"], region, _owner(item, call)) for region, item in page])
        az_of = self._az_of
        items = []
        for region, item in page:
            if spec.az_field and spec.az_field in item and az_of.get(region):
                item[spec.az_field] = az_of[region]
            items.append(item if detail else {k: item[k] for k in ("id", "name", "links") if k in item})
        doc: dict[str, Any] = {spec.list_key: items}
        if more and page:
            last = page[-1][1]["id"]
            self.cursors.put(scope, last, listing.next_cursor(page, start, key))
            next_pairs = [(k, v) for k, v in query.items() if k != "marker"]
            if "limit" not in query:
                next_pairs.append(("limit", str(limit)))
            next_pairs.append(("marker", last))
            doc[f"{spec.list_key}_links"] = [{"rel": "next", "href": f"{call.base}{call.request.path}?{urlencode(next_pairs)}"}]
        text = self._rewriter(call).text(json.dumps(doc))
        return web.Response(status=200, body=text.encode(), content_type="application/json")

    def _limit(self, raw: str | None) -> int:
        if raw is None:
            return self.settings.max_limit
        try:
            limit = int(raw)
        except ValueError:
            raise Fault(400, f"limit must be an integer, not {raw!r}.") from None
        if limit < 0:
            raise Fault(400, "limit must be >= 0.")
        return min(limit, self.settings.max_limit)

    async def _cursor_for(self, call: Call, spec: Routed, marker: str, key) -> listing.Cursor:
        """A marker this process did not hand out: read its sort values from its region."""
        region = await self.router.region_of(spec.kind, marker)
        if region is None:
            raise Fault(400, f"marker [{marker}] not found")
        reply = await self._forward(call, region, "GET", call.rel_for(spec.list_key, marker), body=b"", query="",
                                    timeout=self.settings.list_timeout, unavailable=(spec, marker))
        if reply.status != 200:
            raise Fault(400, f"marker [{marker}] not found")
        item = (reply.json() or {}).get(spec.singular) or {}
        return listing.Cursor({region: marker}, key(item), exact=False)

    # --- local resources ------------------------------------------------------------------
    async def _availability_zones(self, call: Call) -> web.Response:
        if call.method != "GET":
            raise Fault(405, "Method not allowed.")
        zones = [{"zoneName": z, "zoneState": {"available": True}, "hosts": None}
                 for z in await self.router.availability_zones()]
        if call.api is VOLUME:
            for z in zones:
                z.pop("hosts")
        return _json({"availabilityZoneInfo": zones})

    async def _external_events(self, call: Call) -> web.Response:
        """Neutron's notifications reach the region of each server."""
        try:
            events = json.loads(call.body)["events"]
        except (ValueError, KeyError, TypeError, RecursionError):
            raise Fault(400, "Malformed request body: 'events' is required.") from None
        if not isinstance(events, list) or not events:
            raise Fault(400, "Invalid input for field/attribute events: must be a non-empty list.")
        for n, event in enumerate(events):
            if not isinstance(event, dict):
                raise Fault(400, f"Invalid input for field/attribute events[{n}]: must be an object.")
            if not isinstance(event.get("server_uuid"), str):
                raise Fault(400, f"Invalid input for field/attribute events[{n}].server_uuid: must be a string.")
        by_region: dict[str, list] = {}
        for event in events:
            region = await self.router.region_of("server", str(event.get("server_uuid")))
            if region:
                by_region.setdefault(region, []).append(event)
        if not by_region:
            raise Fault(404, "No instances found for any event.")
        replies = await asyncio.gather(*(self._forward(call, r, "POST", call.rel, body=json.dumps({"events": evs}).encode())
                                         for r, evs in by_region.items()))
        merged = [e for reply in replies for e in ((reply.json() or {}).get("events") or [])]
        status = 207 if any(r.status != 200 for r in replies) else 200
        return _json({"events": merged}, status)


async def _read_body(request: web.Request) -> bytes:
    """The body, bounded by ``max_request_body`` (aiohttp's client_max_size):
    a larger one is the API's 413, not a 500."""
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise Fault(413, "Request is too large.") from None


def _owner(item: dict, call: Call) -> str:
    return (item.get("tenant_id") or item.get("os-vol-tenant-attr:tenant_id") or item.get("project_id")
            or call.identity.project_id)


def _members(doc: Any, spec: Routed) -> list[dict]:
    if not isinstance(doc, dict):
        return []
    one = doc.get(spec.singular)
    many = doc.get(spec.list_key)
    out = [one] if isinstance(one, dict) else []
    if isinstance(many, list):
        out += [m for m in many if isinstance(m, dict)]
    return out


def _match_api(path: str) -> tuple[Api | None, list[str]]:
    for api in APIS:
        for prefix in (f"{api.prefix}/{api.version_segment}", *api.aliases):
            if path == prefix or path.startswith(prefix + "/"):
                return api, [s for s in path[len(prefix):].split("/") if s]
    return None, []


def _split_project(api: Api, segments: list[str]) -> tuple[str | None, list[str]]:
    """``[<project>, servers, ...]`` or ``[servers, ...]`` (Nova >= 2.18 style)."""
    if not segments or segments[0] in api.collections:
        return None, segments
    if _PROJECT_ID.match(segments[0]) or (len(segments) > 1 and segments[1] in api.collections):
        return segments[0], segments[1:]
    return None, segments


def _json(doc: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=json.dumps(doc).encode(), content_type="application/json")

