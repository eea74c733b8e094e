"""In-process fake regional Nova and the gateway wired to it (no Keystone, no sandbox)."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from isthmus.db import make_engine
from isthmus.gateway import schema as gateway_schema
from isthmus.gateway import surface
from isthmus.gateway.app import Gateway, Settings
from isthmus.gateway.auth import Identity, Unauthorized
from isthmus.gateway.catalog import Catalog
from isthmus.gateway.core import Core
from isthmus.gateway.idempotency import CreateLedger
from isthmus.gateway.proxy import Upstream
from isthmus.gateway.routing import Router
from isthmus.registry import Registry, create_schema

PROJECT = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"
ADMIN_PROJECT = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
_clock = itertools.count()


@dataclass
class FakeNova:
    region: str
    az: str
    max_version: str = "2.96"
    servers: dict = field(default_factory=dict)
    requests: list = field(default_factory=list)
    base: str = ""
    hang: float = 0.0  # seconds every request sleeps before answering (a hung region)
    extra_flavors: int = 0  # more flavors, each with a link to rewrite (a large reply)
    arrived: int = 0  # requests that reached this region, answered or not
    reply_delay: float = 0.0  # seconds a create waits *after* creating, before answering
    fail_creates: list = field(default_factory=list)  # statuses the next creates answer with, creating nothing

    def add(self, name: str, project: str = PROJECT, created: str | None = None, metadata: dict | None = None) -> dict:
        sid = str(uuid.uuid4())
        self.servers[sid] = {"id": sid, "name": name, "tenant_id": project, "status": "ACTIVE",
                             "metadata": dict(metadata or {}),
                             "created": created or f"2024-01-01T00:{next(_clock) // 60:02d}:{next(_clock) % 60:02d}Z",
                             "OS-EXT-AZ:availability_zone": "nova",
                             "links": [{"rel": "self", "href": f"{self.base}/v2.1/servers/{sid}"},
                                       {"rel": "bookmark", "href": f"{self.base}/servers/{sid}"}]}
        return self.servers[sid]

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        self.arrived += 1
        if self.hang:
            await asyncio.sleep(self.hang)
        body = await request.read()
        self.requests.append((request.method, request.path_qs, dict(request.headers), body))
        parts = [p for p in request.path.split("/") if p]
        if not parts:
            return web.json_response({"versions": [{"id": "v2.1", "status": "CURRENT", "version": self.max_version,
                                                    "min_version": "2.1", "links": []}]})
        parts = parts[1:]  # drop v2.1
        if parts and parts[0] == PROJECT or (parts and parts[0] == OTHER):
            parts = parts[1:]
        if parts == ["servers", "detail"]:
            items = sorted(self.servers.values(), key=lambda s: (s["created"], s["id"]), reverse=True)
            if "name" in request.query:  # a regular expression, as in Nova
                items = [s for s in items if re.search(request.query["name"], s["name"])]
            marker = request.query.get("marker")
            if marker:
                ids = [s["id"] for s in items]
                if marker not in ids:
                    return web.json_response({"badRequest": {"code": 400, "message": f"marker [{marker}] not found"}},
                                             status=400)
                items = items[ids.index(marker) + 1:]
            limit = int(request.query.get("limit", 1000))
            out = {"servers": items[:limit]}
            if len(items) > limit:
                out["servers_links"] = [{"rel": "next", "href": f"{self.base}/v2.1/servers/detail?marker=x"}]
            return web.json_response(out)
        if parts == ["servers"] and request.method == "POST":
            if self.fail_creates:
                status = self.fail_creates.pop(0)
                return web.json_response({"badRequest": {"code": status, "message": "refused"}}, status=status)
            doc = json.loads(body)
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            made = self.add(doc["server"]["name"], created=now, metadata=doc["server"].get("metadata"))
            if self.reply_delay:
                await asyncio.sleep(self.reply_delay)
            return web.json_response({"server": {"id": made["id"], "links": made["links"]}}, status=202)
        if len(parts) >= 2 and parts[0] == "servers":
            server = self.servers.get(parts[1])
            caller = {"user": PROJECT, "colleague": PROJECT, "other": OTHER}.get(
                request.headers.get("X-Auth-Token", ""))
            if server is not None and caller is not None and server["tenant_id"] != caller:
                server = None  # Nova shows a project only its own servers
            if server is None:
                return web.json_response({"itemNotFound": {"code": 404, "message":
                                          f"Instance {parts[1]} could not be found at {self.base}"}}, status=404)
            if request.method == "DELETE":
                del self.servers[parts[1]]
                return web.Response(status=204)
            if len(parts) == 3 and parts[2] == "action":
                return web.json_response({"conflictingRequest": {"code": 409, "message": "wrong state"}}, status=409)
            return web.json_response({"server": server})
        if parts and parts[0] == "flavors":
            flavors: list[dict[str, Any]] = [{"id": "1", "name": f"from-{self.region}"}]
            flavors += [{"id": f"f{n}", "name": f"many-{n}",
                         "links": [{"rel": "self", "href": f"{self.base}/v2.1/flavors/f{n}"}]}
                        for n in range(self.extra_flavors)]
            return web.json_response({"flavors": flavors})
        return web.json_response({"itemNotFound": {"code": 404, "message": "nope"}}, status=404)


class FakeValidator:
    async def validate(self, headers):
        token = headers.get("X-Auth-Token")
        if token == "user":
            return Identity(token, "u", PROJECT, frozenset({"member"}))
        if token == "admin":
            return Identity(token, "a", ADMIN_PROJECT, frozenset({"admin"}))
        if token == "other":
            return Identity(token, "o", OTHER, frozenset({"member"}))
        if token == "colleague":  # another member of the user's project
            return Identity(token, "c", PROJECT, frozenset({"member"}))
        raise Unauthorized(401, b'{"error": {"code": 401}}', [("WWW-Authenticate", "Keystone uri=x")])


async def start(tmp_path, regions: list[FakeNova], serve_regions: bool = True,
                **settings) -> tuple[TestClient, Gateway, list[TestServer]]:
    """A gateway on ``tmp_path``'s database; another call with ``serve_regions=False``
    starts a second gateway process's worth of state on the same database."""
    servers = []
    for nova in regions if serve_regions else []:
        server = TestServer(nova.app())
        await server.start_server()
        nova.base = str(server.make_url("")).rstrip("/")
        servers.append(server)
    engine = make_engine(f"sqlite:///{tmp_path / 'isthmus.sqlite'}")
    create_schema(engine)
    gateway_schema.create_schema(engine)
    registry = Registry(engine)
    registry.ensure_pod("CentralRegion")
    for nova in regions:
        registry.ensure_pod(nova.region, nova.az)

    def load(_refresh):
        return {"compute": [{"region_id": n.region, "interface": "public", "url": n.base + "/v2.1"}
                            for n in regions]}, None

    catalog = Catalog(load, "public", {"CentralRegion"}, ttl=300)
    core = Core.build(Settings(list_timeout=1.0, request_timeout=2.0, **settings),
                      Router(registry, "CentralRegion", regions[0].region if regions else None), catalog,
                      Upstream(breaker_threshold=1))  # one timeout opens it: the tests stay short
    by_region = {n.region: n for n in regions}

    async def confirm_absent(api, region, path):  # what service credentials see: every project's servers
        return path.rsplit("/", 1)[-1] not in by_region[region].servers

    gateway = Gateway(core, FakeValidator(), surface.minimal(core, confirm_absent),
                      CreateLedger(engine, stale_after=5.0))
    client = TestClient(TestServer(gateway.make_app()))
    await client.start_server()
    return client, gateway, servers


async def stop(client: TestClient, servers: list[TestServer]) -> None:
    await client.close()
    for server in servers:
        await server.close()

