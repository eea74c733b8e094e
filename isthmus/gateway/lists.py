"""Merged lists (``GET /servers[/detail]``, ``/volumes``, ...): every region asked
concurrently for one sorted page, k-way merged (the algorithm is in listing.py)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from multidict import MultiDict

from isthmus.gateway import listing
from isthmus.gateway.apis import Routed
from isthmus.gateway.call import Call, Settings, owner
from isthmus.gateway.faults import Fault, integer_at_least
from isthmus.gateway.forwarding import Forwarder
from isthmus.gateway.proxy import Reply
from isthmus.gateway.routing import Router

LOG = logging.getLogger(__name__)


class MergedLists:
    def __init__(self, settings: Settings, router: Router, fwd: Forwarder) -> None:
        self.settings = settings
        self.router = router
        self.fwd = fwd
        self.cursors = listing.CursorCache()

    async def handle(self, call: Call, spec: Routed, detail: bool) -> web.StreamResponse:
        query = MultiDict(call.request.query)
        limit = self._limit(query.get("limit"))
        offset = _non_negative("offset", query.get("offset")) if call.api.list_offset else 0
        marker = query.get("marker")
        try:
            sort = call.api.sort({k: query.getall(k) for k in ("sort_key", "sort_dir", "sort") if k in query})
        except listing.InvalidSort as err:
            raise Fault(400, str(err)) from None
        regions = await self.router.regions()
        # Every region is asked for the exact order the gateway merges on.
        own = ("limit", "marker", "sort", "sort_key", "sort_dir") + (("offset",) if call.api.list_offset else ())
        base_pairs = [(k, v) for k, v in query.items() if k not in own]
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
                    reply = await self.fwd.forward(call, region, "GET", call.rel_for(spec.list_key, "detail"),
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
                more = len(items) >= n or any(link.get("rel") == "next"
                                              for link in data.get(f"{spec.list_key}_links") or [])
                return items, more
            return fetch

        streams = [listing.RegionStream(r, fetcher(r), page_size=min(offset + limit + 1, self.settings.max_limit),
                                        marker=start[r], after=cursor.after if cursor else None, key=key,
                                        exact=cursor.stream_is_exact(r) if cursor else True)
                   for r in regions]
        await asyncio.gather(*(s.prime() for s in streams))
        page, consumed = await listing.merge_page(streams, key, limit, offset)
        if client_error:
            return self.fwd.render(call, client_error[0], None)
        if down:
            LOG.warning("%s: list of %s skipped unavailable region(s) %s", call.request_id, spec.list_key,
                        ", ".join(sorted(set(down))))
            if self.settings.strict_lists:
                raise Fault(503, f"Region(s) {', '.join(sorted(set(down)))} unavailable; the list would be incomplete.")
        self.router.adopt(spec.kind, [(item["id"], region, owner(item, call)) for region, item in page])
        az_of = self.fwd.az_of
        items = []
        for region, item in page:
            for field in spec.az_fields:
                if item.get(field) and az_of.get(region):
                    item[field] = az_of[region]
            items.append(item if detail else {k: item[k] for k in spec.summary_fields if k in item})
        doc: dict[str, Any] = {spec.list_key: items}
        if listing.page_is_full(len(page), limit):
            last = page[-1][1]["id"]
            self.cursors.put(scope, last, listing.next_cursor(consumed, start, key))
            next_pairs = [(k, v) for k, v in query.items() if k != "marker"]
            if "limit" not in query:
                next_pairs.append(("limit", str(limit)))
            next_pairs.append(("marker", last))
            doc[f"{spec.list_key}_links"] = [{"rel": "next",
                                              "href": f"{call.base}{call.request.path}?{urlencode(next_pairs)}"}]
        text = self.fwd.rewriter(call).text(json.dumps(doc))
        return web.Response(status=200, body=text.encode(), content_type="application/json")

    def _limit(self, raw: str | None) -> int:
        if raw is None:
            return self.settings.max_limit
        return min(_non_negative("limit", raw), self.settings.max_limit)

    async def _cursor_for(self, call: Call, spec: Routed, marker: str, key) -> listing.Cursor:
        """A marker this process did not hand out: read its sort values from its region."""
        region = await self.router.region_of(spec.kind, marker)
        if region is None:
            raise Fault(400, f"marker [{marker}] not found")
        reply = await self.fwd.forward(call, region, "GET", call.rel_for(spec.list_key, marker), body=b"", query="",
                                    timeout=self.settings.list_timeout, unavailable=(spec, marker))
        if reply.status != 200:
            raise Fault(400, f"marker [{marker}] not found")
        item = (reply.json() or {}).get(spec.singular) or {}
        return listing.Cursor({region: marker}, key(item), exact=False)


def _non_negative(param: str, raw: str | None) -> int:
    """A ``limit``/``offset`` query value (absent: 0); anything else is the client's 400."""
    if raw is None:
        return 0
    return integer_at_least(raw, 0, f"{param} must be an integer, not {raw!r}.", f"{param} must be >= 0.")
