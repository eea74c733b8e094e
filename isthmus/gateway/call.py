"""One client request as every handler sees it, and the gateway's settings."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from isthmus.gateway import microversion
from isthmus.gateway.apis import APIS, Api, Routed
from isthmus.gateway.auth import Identity
from isthmus.gateway.faults import Fault
from isthmus.gateway.proxy import Reply

_PROJECT_ID = re.compile(r"^[0-9a-fA-F]{32}$|^[0-9a-fA-F-]{36}$")
REQUEST_ID = re.compile(r"^req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


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
    # A larger successful reply from the master is streamed through, not read whole.
    stream_replies_over: int = 1048576
    # How long an idempotent create's outcome is kept (shared across processes).
    create_replay_window: float = 600.0


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
        # A trailing slash goes on as sent: the region decides what it means (dropping
        # it turned Nova's 404 for POST /flavors/ into a parse of the body).
        slash = "/" if parts and self.request.path.endswith("/") else ""
        return "/".join(parts) + slash

    def rel_for(self, *segments: str) -> str:
        return "/".join(([self.project] if self.project else []) + list(segments))


# A global-object write hook: run after a successful write at the master.
Hook = Callable[[Call, str, Reply], Awaitable[None]]
class Settle(Protocol):
    """What a before-create check may hand back: told whether the create happened
    (and the region's reply, when one came)."""

    async def settle(self, created: bool, reply: Reply | None = None) -> None: ...


# A check run before a create is forwarded: (call, spec, region, the object's body);
# it may return a ticket to settle once the outcome is known.
BeforeCreate = Callable[[Call, Routed, str, dict], Awaitable[Settle | None]]
# Rewrites a create's body for the chosen region (e.g. a server group hint): body in, body out.
RewriteCreate = Callable[[Call, Routed, str, bytes], Awaitable[bytes]]
Handler = Callable[[Call], Awaitable[web.StreamResponse]]


async def read_body(request: web.Request) -> bytes:
    """The body, bounded by ``max_request_body`` (aiohttp's client_max_size):
    a larger one is the API's 413, not a 500."""
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise Fault(413, "Request is too large.") from None


def match_api(path: str) -> tuple[Api | None, list[str]]:
    for api in APIS:
        for prefix in (f"{api.prefix}/{api.version_segment}", *api.aliases):
            if path == prefix or path.startswith(prefix + "/"):
                return api, [s for s in path[len(prefix):].split("/") if s]
    return None, []


def split_project(api: Api, segments: list[str]) -> tuple[str | None, list[str]]:
    """``[<project>, servers, ...]`` or ``[servers, ...]`` (Nova >= 2.18 style)."""
    if not segments or segments[0] in api.collections:
        return None, segments
    if _PROJECT_ID.match(segments[0]) or (len(segments) > 1 and segments[1] in api.collections):
        return segments[0], segments[1:]
    return None, segments


def owner(item: dict, call: Call) -> str:
    return (item.get("tenant_id") or item.get("os-vol-tenant-attr:tenant_id") or item.get("project_id")
            or call.identity.project_id)


def members(doc: Any, spec: Routed) -> list[dict]:
    """The routed objects in a reply body (one, or a list)."""
    if not isinstance(doc, dict):
        return []
    one = doc.get(spec.singular)
    many = doc.get(spec.list_key)
    out = [one] if isinstance(one, dict) else []
    if isinstance(many, list):
        out += [m for m in many if isinstance(m, dict)]
    return out


def json_response(doc: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=json.dumps(doc).encode(), content_type="application/json")
