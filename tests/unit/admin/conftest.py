"""An AdminApi on a fresh SQLite database, called in-process with WebOb.

Requests carry the headers keystonemiddleware sets for a validated token
(``X-Identity-Status: Confirmed``, ``X-Roles``, ``X-Project-Id``); the
middleware itself is exercised in test_pipeline.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
import webob

from isthmus import jobs, registry
from isthmus.admin import wsgi
from isthmus.admin.app import AdminApi
from isthmus.admin.policy import make_enforcer
from isthmus.db import make_engine

ADMIN_PROJECT = "admin-project"
DEMO_PROJECT = "demo-project"


def handler_registry() -> jobs.HandlerRegistry:
    handlers = jobs.HandlerRegistry()
    handlers.register("shadow_port", lambda ctx: None, resource_keys=("pod_id", "port_id"))
    handlers.register("network_update", lambda ctx: None, resource_keys=("network_id",))
    handlers.register("plain", lambda ctx: None)
    return handlers


@dataclass
class Answer:
    status: int
    body: Any
    headers: Any


@dataclass
class Client:
    app: Any

    def call(self, method: str, path: str, body: Any = None, *, roles: str = "admin",
             project: str = ADMIN_PROJECT, identity: str | None = "Confirmed", raw: bytes | None = None) -> Answer:
        req = webob.Request.blank(path, method=method)
        if identity is not None:
            req.headers["X-Identity-Status"] = identity
            req.headers["X-Roles"] = roles
            req.headers["X-Project-Id"] = project
            req.headers["X-User-Id"] = f"user-of-{project}"
        if raw is not None:
            req.body = raw
        elif body is not None:
            req.body = json.dumps(body).encode()
            req.content_type = "application/json"
        resp = req.get_response(self.app)
        text = resp.body.decode()
        return Answer(resp.status_int, json.loads(text) if text else None, resp.headers)

    def get(self, path: str, **kw: Any) -> Answer:
        return self.call("GET", path, **kw)

    def post(self, path: str, body: Any, **kw: Any) -> Answer:
        return self.call("POST", path, body, **kw)

    def put(self, path: str, body: Any = None, **kw: Any) -> Answer:
        return self.call("PUT", path, body, **kw)

    def delete(self, path: str, **kw: Any) -> Answer:
        return self.call("DELETE", path, **kw)


@pytest.fixture
def engine(tmp_path):
    eng = make_engine(f"sqlite:///{tmp_path / 'isthmus.sqlite'}")
    registry.create_schema(eng)
    jobs.create_schema(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def conf(tmp_path):
    return wsgi.make_conf([], [])


@pytest.fixture
def api(engine, conf) -> AdminApi:
    return AdminApi(registry.Registry(engine), jobs.JobStore(engine), handler_registry(), make_enforcer(conf),
                    max_limit=conf.pagination_max_limit)


@pytest.fixture
def client(api) -> Client:
    return Client(api)


@pytest.fixture
def pods(client):
    """CentralRegion, RegionOne (az1), RegionTwo (az2), as the sandbox registers them."""
    made = {}
    for region, az in (("CentralRegion", ""), ("RegionOne", "az1"), ("RegionTwo", "az2")):
        answer = client.post("/v1.0/pods", {"pod": {"region_name": region, "az_name": az}})
        assert answer.status == 200, answer.body
        made[region] = answer.body["pod"]
    return made


def fault(answer: Answer, status: int) -> str:
    """The message of an error answer, after checking its status and envelope."""
    assert answer.status == status, answer.body
    (kind, inner), = answer.body.items()
    assert inner["code"] == status
    return inner["message"]
