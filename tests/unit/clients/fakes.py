"""A stand-in for keystoneauth's Adapter: only ``request`` as NeutronClient calls it."""

from __future__ import annotations

import json as jsonlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from keystoneauth1 import adapter as ks_adapter


@dataclass
class Response:
    status_code: int
    body: Any = None

    @property
    def content(self) -> bytes:
        return b"" if self.body is None else jsonlib.dumps(self.body).encode()

    @property
    def text(self) -> str:
        return self.content.decode()

    def json(self) -> Any:
        return self.body


@dataclass
class Call:
    url: str
    method: str
    json: Any
    params: dict | None
    kwargs: dict


@dataclass
class FakeAdapter:
    """Answers each request with ``answer(call)``; records every call."""

    answer: Callable[[Call], Response]
    calls: list[Call] = field(default_factory=list)

    def request(self, url: str, method: str, json: Any = None, params: dict | None = None,
                raise_exc: bool = True, **kwargs: Any) -> Response:
        assert raise_exc is False  # NeutronClient reads statuses itself
        call = Call(url, method, json, dict(params) if params is not None else None, kwargs)
        self.calls.append(call)
        return self.answer(call)


def paged_server(collection: str, items: list[dict], page_size: int,
                 key: str | None = None) -> Callable[[Call], Response]:
    """Neutron's paging with ``pagination_max_limit = page_size``: pages sorted by
    id after ``marker``, a ``next`` link whenever a page is full."""
    key = key or collection
    ordered = sorted(items, key=lambda i: i["id"])

    def answer(call: Call) -> Response:
        params = call.params or {}
        limit = min(int(params.get("limit", page_size)), page_size)
        start = 0
        if "marker" in params:
            ids = [i["id"] for i in ordered]
            if params["marker"] not in ids:
                return Response(404, {"NeutronError": {"type": "PortNotFound", "message": "marker not found"}})
            start = ids.index(params["marker"]) + 1
        page = ordered[start:start + limit]
        body: dict = {key: page}
        if len(page) == limit:
            href = f"http://neutron:9696/v2.0/{collection}?limit={limit}&marker={page[-1]['id']}"
            body[f"{key}_links"] = [{"rel": "next", "href": href}]
        return Response(200, body)

    return answer


def as_adapter(fake: FakeAdapter) -> ks_adapter.Adapter:
    """NeutronClient calls only request(), which the fake answers with a Response stand-in."""
    return cast(ks_adapter.Adapter, fake)
