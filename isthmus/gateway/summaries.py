"""``GET /volumes/summary`` (Cinder >= 3.12): every region's summary of the caller's
volumes, added up. Without it the path reads as a volume named ``summary``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from aiohttp import web

from isthmus.gateway.call import Call, Settings, json_response
from isthmus.gateway.faults import Fault
from isthmus.gateway.forwarding import Forwarder
from isthmus.gateway.proxy import Reply
from isthmus.gateway.routing import Router

LOG = logging.getLogger(__name__)

KEY = "volume-summary"


def add_summaries(summaries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts and sizes add up; ``metadata`` (>= 3.36: key -> its distinct values)
    is the union, each key's values in first-seen order. A region that shows no
    metadata (the microversion is below 3.36) leaves it out, as Cinder does."""
    total: dict[str, Any] = {"total_count": 0, "total_size": 0}
    metadata: dict[str, list] | None = None
    for summary in summaries:
        total["total_count"] += int(summary.get("total_count") or 0)
        total["total_size"] += int(summary.get("total_size") or 0)
        if "metadata" in summary:
            metadata = metadata if metadata is not None else {}
            for key, values in (summary["metadata"] or {}).items():
                merged = metadata.setdefault(key, [])
                merged += [v for v in values if v not in merged]
    if metadata is not None:
        total["metadata"] = metadata
    return total


async def volume_summary(call: Call, settings: Settings, router: Router, fwd: Forwarder) -> web.StreamResponse:
    regions = await router.regions()
    replies = await asyncio.gather(*(fwd.forward(call, r, "GET", call.rel, body=b"", timeout=settings.list_timeout)
                                     for r in regions), return_exceptions=True)
    answered: list[Reply] = []
    down: list[str] = []
    for region, reply in zip(regions, replies, strict=True):
        if isinstance(reply, Fault) or (isinstance(reply, Reply) and reply.status >= 500):
            down.append(region)
        elif isinstance(reply, BaseException):
            raise reply
        else:
            answered.append(reply)
    # Every region answers a bad request (an old microversion, a bad filter) alike.
    refused = [r for r in answered if r.status != 200]
    if refused:
        return fwd.render(call, refused[0], None)
    if down:
        LOG.warning("%s: volume summary skipped unavailable region(s) %s", call.request_id, ", ".join(down))
        if settings.strict_lists or not answered:
            raise Fault(503, f"Region(s) {', '.join(down)} unavailable; the summary would be incomplete.")
    return json_response({KEY: add_summaries((r.json() or {}).get(KEY) or {} for r in answered)})
