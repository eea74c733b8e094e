"""The gateway's request handling (aiohttp): authenticate, parse, dispatch.

Each concern has its own module and one entry point; this one only dispatches:
versions.py (version documents, microversion range), members.py (calls on one
routed object), creates.py, lists.py (merged lists), events.py, and forwarding.py
(the one way to a region). What the gateway answers itself, the hooks around a
create and after a write at the master region are declared once in surface.py;
global objects and every unrouted call go to the master region (core.MasterRegion).
"""

from __future__ import annotations

import logging
import time
import uuid

from aiohttp import web

from isthmus.gateway import faults, metrics, microversion
from isthmus.gateway.apis import COMPUTE, VOLUME, Api
from isthmus.gateway.auth import Unauthorized
from isthmus.gateway.call import REQUEST_ID, Call, Settings, match_api, read_body, split_project
from isthmus.gateway.core import Core
from isthmus.gateway.creates import Creates
from isthmus.gateway.events import external_events
from isthmus.gateway.faults import Fault
from isthmus.gateway.idempotency import CreateLedger
from isthmus.gateway.lists import MergedLists
from isthmus.gateway.members import MemberCalls
from isthmus.gateway.surface import Surface

LOG = logging.getLogger(__name__)

__all__ = ["Call", "Gateway", "Settings"]


class Gateway:
    """Authenticate, parse and dispatch: by id to the object's region, lists to
    every region, creates to the chosen one, the declared surface to its handlers,
    everything else to the master region."""

    def __init__(self, core: Core, validator, surface: Surface, ledger: CreateLedger | None = None) -> None:
        self.settings = core.settings
        self.router = core.router
        self.upstream = core.upstream
        self.versions = core.versions
        self.validator = validator
        self.surface = surface
        self.members = MemberCalls(core.settings, core.router, core.fwd, surface.rewrite_reply,
                                   surface.confirm_absent)
        self.creates = Creates(core.settings, core.router, core.fwd, core.background, ledger, surface.before_create,
                               surface.rewrite_create)
        self.lists = MergedLists(core.settings, core.router, core.fwd)
        self.fwd = core.fwd

    # --- aiohttp plumbing ----------------------------------------------------------
    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=self.settings.max_request_body)
        app.router.add_get("/metrics", self.metrics)  # before the catch-all; no API lives there
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_startup.append(self._startup)
        app.on_cleanup.append(self._cleanup)
        return app

    async def _startup(self, _app) -> None:
        await self.upstream.start()

    async def _cleanup(self, _app) -> None:
        await self.router.drain()
        await self.upstream.close()

    async def metrics(self, _request: web.Request) -> web.Response:
        body, content_type = metrics.exposition(self.upstream.breakers)
        return web.Response(body=body, headers={"Content-Type": content_type})

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
        # A forwarded reply keeps the region's request id (see forwarding.render);
        # one the gateway made itself gets the gateway's.
        upstream_id = response.headers.get("x-openstack-request-id")
        response.headers.setdefault("x-openstack-request-id", request_id)
        if api is COMPUTE:
            response.headers.setdefault("x-compute-request-id", response.headers["x-openstack-request-id"])
        if api is not None and version is not None:
            response.headers.update(microversion.response_headers(api.mv, version))
        # The matched API even when the request failed after matching (401, 403, ...).
        metrics.observe_request(metrics.CURRENT_API.get(), request.method, response.status,
                                time.monotonic() - started)
        LOG.info("%s %s %s -> %d in %.3fs%s", request_id, request.method, request.path_qs, response.status,
                 time.monotonic() - started, f" (region's {upstream_id})" if upstream_id else "")
        return response

    def _base(self, request: web.Request) -> str:
        if self.settings.public_url:
            return self.settings.public_url.rstrip("/")
        return f"{request.scheme}://{request.host}"

    async def _dispatch(self, request: web.Request, request_id: str):
        path = request.path
        base = self._base(request)
        if path.rstrip("/") in ("", COMPUTE.prefix):
            return await self.versions.root(request, COMPUTE, base), None, None
        if path.rstrip("/") == VOLUME.prefix:
            return await self.versions.root(request, VOLUME, base), None, None
        api, rest = match_api(path)
        if api is None:
            raise Fault(404, "Not found.")
        metrics.CURRENT_API.set(api.name)  # labels the region calls this request makes
        if not rest:
            return await self.versions.document(request, api, base), None, None
        supported = await self.versions.supported(api)
        try:
            version = microversion.requested(request.headers, api.mv, supported)
        except microversion.BadVersion as err:
            raise Fault(406, str(err)) from None
        identity = await self.validator.validate(request.headers)
        if any(s in (".", "..") for s in rest):
            # No resource has such a name; forwarded, the URL would resolve it to
            # another one (PATCH /os-keypairs/.. became PATCH /v2.1/ in the region).
            raise Fault(404, "Not found.")
        project, segments = split_project(api, rest)
        if project and project != identity.project_id and not identity.is_admin:
            raise Fault(403, f"Project {project} is not the project of the token.")
        inbound_rid = request.headers.get("X-OpenStack-Request-ID", "")
        call = Call(request, api, identity, version, project, segments, await read_body(request), request_id,
                    inbound_rid if REQUEST_ID.match(inbound_rid) else request_id, base)
        return await self._route(call), api, version

    async def _route(self, call: Call) -> web.StreamResponse:
        api, segs = call.api, call.segments
        if not segs:
            return await self.versions.document(call.request, api, call.base)
        collection = segs[0]
        local = self.surface.local_handlers.get((api.name, collection))
        if local is not None:
            return await local(call)
        spec = api.routed.get(collection)
        if spec is None:
            if api is COMPUTE and collection == "os-server-external-events" and call.method == "POST":
                return await external_events(call, self.router, self.fwd)
            return await self.surface.master.forward(call)
        if len(segs) == 1 or (len(segs) == 2 and segs[1] == "detail"):
            if call.request.path.endswith("/"):
                # An empty id (``DELETE /volumes/``): no object to route by, and no
                # list or create either; the master region answers it as any region
                # would (Cinder 404), as for paths with a trailing slash (see Call.rel).
                return await self.surface.master.forward(call)
            if call.method == "GET":
                return await self.lists.handle(call, spec, detail=len(segs) == 2)
            if call.method == "POST" and len(segs) == 1:
                return await self.creates.handle(call, spec)
            raise Fault(405, "Method not allowed.")
        path_handler = self.surface.collection_paths.get((api.name, "/".join(segs)))
        if path_handler is not None and call.method == "GET":
            return await path_handler(call)
        return await self.members.handle(call, spec)
