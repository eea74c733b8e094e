"""A small Neutron REST client returning plain dicts (what reconcilers diff).

Errors keep "not found" apart from "could not tell": a 404 is ``None``; an
unreachable region or a 5xx is :class:`Unavailable`, which callers must never
read as "gone"; another 4xx is :class:`Rejected` with Neutron's message.

Every request is bounded and guarded as :mod:`isthmus.clients.service` says.
"""

from __future__ import annotations

import builtins
from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests

from isthmus.clients.service import DEFAULT_TIMEOUT, Body, Rejected, ServiceClient, Unavailable, member_path

__all__ = ["DEFAULT_TIMEOUT", "Body", "NeutronClient", "Rejected", "Unavailable"]


_COLLECTION_KEYS = {"security-groups": "security_groups", "security-group-rules": "security_group_rules",
                    "address-groups": "address_groups"}


def singular(collection: str) -> str:
    return {"security-groups": "security_group", "security-group-rules": "security_group_rule",
            "address-groups": "address_group", "networks": "network", "subnets": "subnet",
            "ports": "port", "routers": "router", "floatingips": "floatingip"}[collection]




class NeutronClient(ServiceClient):
    """Plain-dict CRUD over Neutron's v2.0 API (pages followed to the end)."""

    service = "Neutron"
    prefix = "/v2.0/"

    def call(self, method: str, path: str, body: Body | None = None, params: dict[str, Any] | None = None,
             headers: dict[str, str] | None = None) -> Body | None:
        """The response body; None for a 404 naming a missing object."""
        resp = self._send(method, path, body, params, headers)
        if resp.status_code == 404:
            self._raise_if_not_served(resp, path)
            return None
        return self._body(resp)

    def _raise_if_not_served(self, resp: requests.Response, path: str) -> None:
        """A 404 for the URL itself is no answer about any object: the API is not
        served there (an extension not loaded, a server still loading its
        plugins after a restart). Neutron says which: ``<Resource>NotFound`` for
        a missing object, ``HTTPNotFound`` for a URL it does not serve. Read as
        "gone", the first would delete and remake what exists."""
        try:
            kind = resp.json()["NeutronError"]["type"]
        except (ValueError, KeyError, TypeError):
            kind = None
        if kind in (None, "HTTPNotFound"):
            raise Unavailable(f"{self.region} Neutron does not serve {path.split('?')[0]} (404: {_message(resp)})")

    def _body(self, resp: requests.Response) -> Body:
        if resp.status_code >= 500:
            raise Unavailable(f"{self.region} Neutron answered {resp.status_code}: {resp.text[:300]}")
        if resp.status_code >= 400:
            raise Rejected(resp.status_code, f"{self.region} Neutron: {_message(resp)}")
        body: Body = resp.json() if resp.content else {}
        return body

    def get(self, collection: str, obj_id: str) -> Body | None:
        member = member_path(collection, obj_id)
        body = self.call("GET", member) if member else None
        # A body without the object (a list, a version document) means the URL
        # reached something else: no object has that id.
        if not isinstance(body, dict):
            return None
        found: Body | None = body.get(singular(collection))
        return found

    def list(self, collection: str, **filters: Any) -> list[Body]:
        """Every item, whatever ``pagination_max_limit`` the server has: a
        truncated list would make reconcilers delete what they did not see, so
        a list that cannot be completed raises :class:`Unavailable`."""
        items: list[Body] = []
        params = dict(filters)
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            page, links = self._page(collection, params, first=not seen)
            items.extend(page)
            try:
                marker = _next_marker(links, page, _page_size(params.get("limit")))
            except ValueError as err:
                raise Unavailable(f"{self.region} Neutron listing {collection}: {err}") from err
            if marker is None:
                return items
            if marker in seen:  # a server going round in circles: never a partial list
                raise Unavailable(f"{self.region} Neutron repeated marker {marker} listing {collection}")
            seen.add(marker)
            params = {**filters, **_next_page(links, params), "marker": marker}
        raise Unavailable(f"{self.region} Neutron: {collection} list longer than {MAX_PAGES} pages")

    def _page(self, collection: str, params: dict[str, Any], first: bool) -> tuple[builtins.list[Body], Any]:
        """One page's items and ``<collection>_links``."""
        key = _COLLECTION_KEYS.get(collection, collection)
        body = self.call("GET", collection, params=params)
        if body is None and not first:  # the marker was deleted meanwhile: the rest is unknown
            raise Unavailable(f"{self.region} Neutron lost marker {params.get('marker')} listing {collection}")
        body = body or {}
        return body.get(key, []), body.get(f"{key}_links")

    def create(self, collection: str, obj: Body) -> Body:
        key = singular(collection)
        created: Body = self._post(collection, key, obj)
        return created

    def create_many(self, collection: str, objs: builtins.list[Body]) -> builtins.list[Body]:
        """One bulk POST: Neutron creates all in one transaction, or none (a 409
        for any one of them refuses the lot)."""
        if not objs:
            return []
        created: builtins.list[Body] = self._post(collection, _COLLECTION_KEYS.get(collection, collection), objs)
        return created

    def _post(self, collection: str, key: str, payload: Any) -> Any:
        resp = self._send("POST", collection, {key: payload}, None)
        if resp.status_code == 404:  # something the body names (network, group) does not exist there
            self._raise_if_not_served(resp, collection)
            raise Rejected(404, f"{self.region} Neutron: {_message(resp)}")
        return self._body(resp)[key]

    def update(self, collection: str, obj_id: str, changes: Body, if_revision: int | None = None) -> Body | None:
        """``if_revision``: only if the object is still at that revision_number
        (Neutron answers 412, raised as Rejected, when it changed meanwhile)."""
        key = singular(collection)
        headers = {"If-Match": f"revision_number={if_revision}"} if if_revision is not None else None
        member = member_path(collection, obj_id)
        if member is None:
            return None
        body = self.call("PUT", member, {key: changes}, headers=headers)
        updated: Body | None = body[key] if body else None
        return updated

    def action(self, collection: str, obj_id: str, action: str, request: Body) -> Body | None:
        """A member action (``PUT <collection>/<id>/<action>``) with its body as
        given (an address group's ``add_addresses`` takes ``{"addresses": [...]}``,
        not wrapped); the updated object, None for a 404."""
        member = member_path(collection, obj_id)
        if member is None:
            return None
        body = self.call("PUT", f"{member}/{action}", request)
        updated: Body | None = body.get(singular(collection), body) if body is not None else None
        return updated

    def delete(self, collection: str, obj_id: str, if_revision: int | None = None) -> bool:
        """True if deleted, False if it was already gone. ``if_revision``: as for
        :meth:`update` (a 412 when the object changed since it was read)."""
        member = member_path(collection, obj_id)
        headers = {"If-Match": f"revision_number={if_revision}"} if if_revision is not None else None
        return member is not None and self.call("DELETE", member, headers=headers) is not None


MAX_PAGES = 10_000  # bounds a list whose server keeps inventing markers


def _next_link(links: Any) -> str | None:
    for link in links or []:
        if isinstance(link, dict) and link.get("rel") == "next" and link.get("href"):
            href: str = link["href"]
            return href
    return None


def _page_size(limit: Any) -> int | None:
    try:
        return int(limit) if limit is not None else None
    except (TypeError, ValueError):
        return None


def _next_marker(links: Any, page: list[Body], page_size: int | None) -> str | None:
    """The marker of the next page; None when this page was the last.

    Neutron links a next page whenever a page is full (so a list ending exactly
    at the limit costs one more, empty, page). Its marker is the next link's,
    else the last item's id (a link without one, or a full page of a known size
    left unlinked)."""
    if not page:
        return None
    href = _next_link(links)
    if href is not None:
        marker = parse_qs(urlsplit(href).query).get("marker")
        if marker:
            return marker[-1]
    elif page_size is None or len(page) < page_size:
        return None
    last = page[-1].get("id") if isinstance(page[-1], dict) else None
    if not last:
        raise ValueError("a next page without a marker, and items without ids")
    return str(last)


def _next_page(links: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The page size to ask next: the next link's ``limit``, else the one asked."""
    href = _next_link(links)
    limit = parse_qs(urlsplit(href).query).get("limit") if href else None
    if limit:
        return {"limit": limit[-1]}
    return {"limit": params["limit"]} if "limit" in params else {}


def _message(resp: requests.Response) -> str:
    try:
        message: str = resp.json()["NeutronError"]["message"]
        return message
    except (ValueError, KeyError, TypeError):
        return resp.text[:300]
