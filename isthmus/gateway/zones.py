"""``os-availability-zone`` (Nova and Cinder): the registry's top-level zones."""

from __future__ import annotations

from aiohttp import web

from isthmus.gateway.apis import VOLUME
from isthmus.gateway.call import Call, json_response
from isthmus.gateway.faults import Fault
from isthmus.gateway.routing import Router


async def availability_zones(call: Call, router: Router) -> web.Response:
    if call.method != "GET":
        raise Fault(405, "Method not allowed.")
    zones = [{"zoneName": z, "zoneState": {"available": True}, "hosts": None}
             for z in await router.availability_zones()]
    if call.api is VOLUME:
        for z in zones:
            z.pop("hosts")
    return json_response({"availabilityZoneInfo": zones})
