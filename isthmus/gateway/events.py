"""``os-server-external-events``: Neutron's notifications reach each server's region."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from isthmus.gateway.call import Call, json_response
from isthmus.gateway.faults import Fault
from isthmus.gateway.forwarding import Forwarder
from isthmus.gateway.routing import Router


def _events(body: bytes) -> list[dict]:
    try:
        events = json.loads(body)["events"]
    except (ValueError, KeyError, TypeError, RecursionError):
        raise Fault(400, "Malformed request body: 'events' is required.") from None
    if not isinstance(events, list) or not events:
        raise Fault(400, "Invalid input for field/attribute events: must be a non-empty list.")
    for n, event in enumerate(events):
        if not isinstance(event, dict):
            raise Fault(400, f"Invalid input for field/attribute events[{n}]: must be an object.")
        if not isinstance(event.get("server_uuid"), str):
            raise Fault(400, f"Invalid input for field/attribute events[{n}].server_uuid: must be a string.")
    return events


async def external_events(call: Call, router: Router, fwd: Forwarder) -> web.Response:
    by_region: dict[str, list] = {}
    for event in _events(call.body):
        region = await router.region_of("server", event["server_uuid"])
        if region:
            by_region.setdefault(region, []).append(event)
    if not by_region:
        # No server of these is known: the master answers as Nova does for this
        # caller (403 to a non-admin), never a 404 of ours that a stranger could read.
        master = await router.master_region()
        return fwd.render(call, await fwd.forward(call, master, "POST", call.rel), master)
    replies = await asyncio.gather(*(fwd.forward(call, r, "POST", call.rel, body=json.dumps({"events": evs}).encode())
                                     for r, evs in by_region.items()))
    merged = [e for reply in replies for e in ((reply.json() or {}).get("events") or [])]
    status = 207 if any(r.status != 200 for r in replies) else 200
    return json_response({"events": merged}, status)
