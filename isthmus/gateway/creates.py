"""Creates of routed objects (``POST /servers``, ``/volumes``, ``/snapshots``,
``/backups``): placed in a region, checked, forwarded, recorded in the routing
table before the reply, and idempotent under the client's request id."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from multidict import CIMultiDict

from isthmus.gateway.apis import Routed
from isthmus.gateway.call import BeforeCreate, Call, RewriteCreate, Settings, Settle
from isthmus.gateway.faults import Fault
from isthmus.gateway.forwarding import Forwarder
from isthmus.gateway.idempotency import (
    CREATE_KEY_METADATA,
    ClaimState,
    CreateLedger,
    StoredReply,
    create_key,
    kept_headers,
    scrub,
)
from isthmus.gateway.pools import BoundedPool
from isthmus.gateway.proxy import Reply
from isthmus.gateway.routing import Router

LOG = logging.getLogger(__name__)
# Clocks of the gateway hosts and the regions differ a little: search a bit earlier.
_CLOCK_SLACK = timedelta(seconds=10)
# A reply body's fields a replayed (recovered) server create shows, as Nova's 202 does.
_SERVER_CREATE_FIELDS = ("id", "links", "OS-DCF:diskConfig", "security_groups")


class NotHeard(Exception):
    """The create was sent and no answer came back: the region may have created it."""

    def __init__(self, fault: Fault) -> None:
        super().__init__(fault.message)
        self.fault = fault


class Creates:
    def __init__(self, settings: Settings, router: Router, fwd: Forwarder, background: BoundedPool,
                 ledger: CreateLedger | None = None, before_create: Sequence[BeforeCreate] = (),
                 rewrite_create: Sequence[RewriteCreate] = ()) -> None:
        self.settings = settings
        self.router = router
        self.fwd = fwd
        self.background = background
        self.ledger = ledger
        # Checks before forwarding (quota, image copies, ...). One may return an
        # object with ``settle(created)``, called once the region has answered.
        self.before_create = tuple(before_create)
        # Body rewriters for the chosen region (e.g. a server group hint): body in, body out.
        self.rewrite_create = tuple(rewrite_create)
        self._inflight: dict[str, asyncio.Task] = {}
        self._zones: dict[tuple[str, str], tuple[float, str]] = {}

    async def handle(self, call: Call, spec: Routed) -> web.Response:
        obj, body, region = await self._place(call, spec)
        inbound = call.request.headers.get("X-OpenStack-Request-ID")
        if not inbound or self.ledger is None:
            reply = await self._create(call, spec, region, body, obj)
            return self.fwd.render(call, reply, region, spec)
        key = create_key(call.identity.user_id, call.identity.project_id, call.api.name, spec.kind, inbound,
                         call.body)
        task = self._inflight.get(key)
        if task is None:  # identical creates in this process share one attempt
            task = asyncio.get_running_loop().create_task(self._idempotent(call, spec, region, body, obj, key))
            self._inflight[key] = task
            task.add_done_callback(lambda _t: self._inflight.pop(key, None))
        reply, where = await asyncio.shield(task)
        return self.fwd.render(call, reply, where, spec)

    # --- placement ---------------------------------------------------------------------
    async def _place(self, call: Call, spec: Routed) -> tuple[dict, bytes, str]:
        try:
            doc = json.loads(call.body or b"null")
        except (ValueError, RecursionError):  # RecursionError: nested deeper than Python parses
            raise Fault(400, "Malformed request body.") from None
        obj = doc.get(spec.singular) if isinstance(doc, dict) else None
        if not isinstance(obj, dict):
            raise Fault(400, f"The request body must contain a '{spec.singular}' object.")
        body = call.body
        if spec.placement == "schedule":
            requested = obj.get("availability_zone")
            if requested is not None and not isinstance(requested, str):
                raise Fault(400, f"Invalid input for field/attribute {spec.singular}.availability_zone: "
                                 f"{requested!r} is not a string.")
            zone, sep, host = (requested or "").partition(":")
            pod = await self.router.choose(call.identity.project_id, zone or None, self.fwd.sick_regions())
            region = pod.region_name
            # A pod registered without its regional AZ name: the region's one zone,
            # so the server is still pinned to it (Nova >= 2.96 shows the pin).
            regional = pod.pod_az_name or (await self._sole_zone(call, region) if requested else "")
            if requested and zone != regional:
                if regional:
                    obj["availability_zone"] = regional + sep + host
                elif sep:
                    obj["availability_zone"] = sep + host  # ":host" keeps an admin's host pin
                else:
                    del obj["availability_zone"]
                body = json.dumps(doc).encode()
            return obj, body, region
        volume_id = obj.get(spec.volume_field)
        routed = await self.router.region_of("volume", str(volume_id)) if volume_id else None
        if routed is None:
            raise Fault(404 if volume_id else 400,
                        f"Volume {volume_id} could not be found." if volume_id else f"{spec.volume_field} is required.")
        return obj, body, routed

    async def _sole_zone(self, call: Call, region: str) -> str:
        """The region's only user-visible AZ ("" if it has several or cannot say),
        read with the caller's token and cached like the catalog."""
        key = (call.api.name, region)
        cached = self._zones.get(key)
        if cached and time.monotonic() - cached[0] < self.settings.catalog_ttl:
            return cached[1]
        try:
            reply = await self.fwd.forward(call, region, "GET", call.rel_for("os-availability-zone"), body=b"",
                                           query="", timeout=self.settings.list_timeout)
        except Fault:
            return ""  # the create itself will say whether the region is there
        if reply.status != 200:
            return ""
        zones = [z.get("zoneName") for z in (reply.json() or {}).get("availabilityZoneInfo") or []
                 if isinstance(z, dict) and (z.get("zoneState") or {}).get("available")
                 and z.get("zoneName") not in (None, "internal")]
        sole = zones[0] if len(zones) == 1 and isinstance(zones[0], str) else ""
        self._zones[key] = (time.monotonic(), sole)
        return sole

    # --- one create --------------------------------------------------------------------
    async def _create(self, call: Call, spec: Routed, region: str, body: bytes, obj: dict) -> Reply:
        """Checks, then the region, then the routing row. Raises NotHeard when the
        region may have created it without our hearing."""
        pending: list[Settle] = []
        created = False
        reply: Reply | None = None
        try:
            as_asked = json.dumps(obj, sort_keys=True)
            for check in self.before_create:
                ticket = await check(call, spec, region, obj)
                if ticket is not None:
                    pending.append(ticket)
            if json.dumps(obj, sort_keys=True) != as_asked:  # a check narrowed it (max_count to the quota)
                body = _with_object(body, spec.singular, obj)
            for rewrite in self.rewrite_create:
                body = await rewrite(call, spec, region, body)
            try:
                reply = await self.fwd.forward(call, region, "POST", call.rel, body=body)
            except Fault as fault:
                created = True  # unknown: keep what was reserved until it expires
                raise NotHeard(fault) from None
            created = 200 <= reply.status < 300 or reply.status >= 500
            if 200 <= reply.status < 300:
                await self._record(call, spec, region, reply)
            return reply
        finally:
            for ticket in pending:
                try:
                    await ticket.settle(created, reply)
                except Exception:  # noqa: BLE001 - an unsettled reservation expires by itself
                    LOG.exception("%s: settling a reservation failed", call.request_id)

    async def _record(self, call: Call, spec: Routed, region: str, reply: Reply) -> None:
        if not reply.is_json:
            return
        resource_id = ((reply.json() or {}).get(spec.singular) or {}).get("id")
        if not resource_id:
            return  # e.g. return_reservation_id: members are adopted when listed
        for attempt in range(3):
            try:
                await self.router.record(spec.kind, resource_id, region, call.identity.project_id)
                return
            except Exception as err:  # noqa: BLE001 - retried; after three failures the create is undone below
                LOG.warning("%s: recording %s %s (attempt %d): %s", call.request_id, spec.kind, resource_id,
                            attempt + 1, err)
                await asyncio.sleep(0.2 * (attempt + 1))
        # No routing means an invisible resource: undo the create rather than orphan it.
        LOG.error("%s: %s %s in %s has no routing; deleting it", call.request_id, spec.kind, resource_id, region)
        try:
            await self.fwd.forward(call, region, "DELETE", call.rel_for(spec.list_key, resource_id), body=b"",
                                   query="")
        except Fault:
            LOG.error("%s: compensating delete of %s %s failed; it will be adopted when listed",
                      call.request_id, spec.kind, resource_id)
        raise Fault(500, f"The {spec.label.lower()} could not be recorded; the create was undone.")

    # --- idempotent creates -------------------------------------------------------------
    async def _idempotent(self, call: Call, spec: Routed, region: str, body: bytes, obj: dict,
                          key: str) -> tuple[Reply, str]:
        ledger = self.ledger
        assert ledger is not None
        deadline = time.monotonic() + self.settings.request_timeout + 30
        while True:
            claim = await self.background.run(ledger.claim, key, call.identity.project_id, region)
            if claim.state is ClaimState.DONE:
                assert claim.reply is not None
                LOG.info("%s: identical create: replaying the first attempt's reply", call.request_id)
                return _reply(claim.reply), claim.region or region
            if claim.state is ClaimState.RUNNING:
                if time.monotonic() > deadline:
                    raise Fault(409, "An identical create (same X-OpenStack-Request-ID and body) is still "
                                     "in progress.")
                await asyncio.sleep(0.5)
                continue
            if claim.state is ClaimState.RECOVER and claim.region:
                try:
                    found = await self._find_accepted(call, spec, claim.region, key, claim.started_at)
                except BaseException:  # still unknown: the next retry searches again
                    await asyncio.shield(self.background.run(ledger.unknown, key, claim.owner))
                    raise
                if found is not None:
                    reply = _created_reply(spec, found)
                    await self._record(call, spec, claim.region, reply)
                    await self.background.run(ledger.done, key, claim.owner, found["id"],
                                              StoredReply(reply.status, [], reply.body), claim.region)
                    LOG.info("%s: an earlier attempt created %s %s in %s; not creating again", call.request_id,
                             spec.kind, found["id"], claim.region)
                    return reply, claim.region
            return await self._create_claimed(call, spec, region, body, obj, key, claim.owner), region

    async def _create_claimed(self, call: Call, spec: Routed, region: str, body: bytes, obj: dict, key: str,
                              owner: str) -> Reply:
        ledger = self.ledger
        assert ledger is not None
        await self.background.run(ledger.sent, key, owner, region)
        body, obj = _tagged(body, spec.singular, obj, key)
        heartbeat = asyncio.get_running_loop().create_task(self._keep_alive(key, owner))
        try:
            reply = await self._create(call, spec, region, body, obj)
        except NotHeard as err:
            await self.background.run(ledger.unknown, key, owner)
            raise err.fault from None
        except BaseException:
            await asyncio.shield(self.background.run(ledger.forget, key, owner))
            raise
        finally:
            heartbeat.cancel()
        if 200 <= reply.status < 300:
            resource_id = ((reply.json() or {}).get(spec.singular) or {}).get("id") if reply.is_json else None
            stored = StoredReply(reply.status, kept_headers(reply.headers), scrub(reply.body, spec.singular))
            try:
                await self.background.run(ledger.done, key, owner, resource_id, stored, region)
            except Exception:  # noqa: BLE001 - the object exists: the caller gets its reply, never a 500
                # The row stays pending, goes stale, and a retry recovers by the key on the object.
                LOG.exception("%s: recording the create's reply failed; a retry finds %s by its key",
                              call.request_id, resource_id)
        elif reply.status >= 500:
            await self.background.run(ledger.unknown, key, owner)  # it may exist: the next attempt searches
        else:
            await self.background.run(ledger.forget, key, owner)  # an error is never replayed
        return reply

    async def _keep_alive(self, key: str, owner: str) -> None:
        """Touch the ledger row while the attempt works (a long image copy, a slow
        region): another process takes over only an attempt that stopped."""
        ledger = self.ledger
        assert ledger is not None
        period = max(ledger.stale_after.total_seconds() / 3, 0.1)
        while True:
            await asyncio.sleep(period)
            try:
                await self.background.run(ledger.touch, key, owner)
            except Exception:  # noqa: BLE001 - the next beat tries again
                LOG.warning("touching the create ledger row failed", exc_info=True)

    async def _find_accepted(self, call: Call, spec: Routed, region: str, key: str,
                             since: datetime | None) -> dict | None:
        """What an earlier attempt that went unheard created in ``region``: the
        object carrying this create's ledger key in its metadata (never a
        same-named object someone else made meanwhile). Asked with the caller's
        own token."""
        since = (since or datetime.utcnow()) - _CLOCK_SLACK
        if spec.kind == "server":  # Nova does not filter by metadata: the servers changed since
            pairs = [("changes-since", since.isoformat(timespec="seconds") + "Z")]
        else:
            pairs = [("metadata", json.dumps({CREATE_KEY_METADATA: key}))]
        reply = await self.fwd.forward(call, region, "GET", call.rel_for(spec.list_key, "detail"),
                                       query=urlencode(pairs), body=b"", timeout=self.settings.list_timeout)
        if reply.status != 200:
            raise Fault(503, f"Could not check whether an earlier identical create succeeded in {region}; "
                             "retry later.")
        items = [i for i in (reply.json() or {}).get(spec.list_key) or []
                 if isinstance(i, dict) and (i.get("metadata") or {}).get(CREATE_KEY_METADATA) == key]
        items.sort(key=lambda i: (_created_at(i) or datetime.min, i.get("id", "")))
        return items[0] if items else None


def _created_at(item: dict) -> datetime | None:
    raw = item.get("created") or item.get("created_at")
    if not isinstance(raw, str):
        return None
    try:
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.replace(tzinfo=None) - (parsed.utcoffset() or timedelta(0))


def _created_reply(spec: Routed, item: dict) -> Reply:
    obj: dict[str, Any] = ({k: item[k] for k in _SERVER_CREATE_FIELDS if k in item}
                           if spec.kind == "server" else item)
    headers: CIMultiDict[str] = CIMultiDict({"Content-Type": "application/json"})
    self_link = next((link.get("href") for link in item.get("links") or [] if link.get("rel") == "self"), None)
    if spec.kind == "server" and self_link:
        headers["Location"] = self_link
    return Reply(202, headers, json.dumps({spec.singular: obj}).encode())


def _tagged(body: bytes, singular: str, obj: dict, key: str) -> tuple[bytes, dict]:
    """The create with its ledger key in the object's metadata (what recovery finds
    it by). Metadata that is not an object is left for the region to refuse."""
    metadata = obj.get("metadata", {})
    if not isinstance(metadata, dict):
        return body, obj
    tagged = {**obj, "metadata": {**metadata, CREATE_KEY_METADATA: key}}
    return _with_object(body, singular, tagged), tagged


def _with_object(body: bytes, singular: str, obj: dict) -> bytes:
    doc = json.loads(body)
    doc[singular] = obj
    return json.dumps(doc).encode()


def _reply(stored: StoredReply) -> Reply:
    return Reply(stored.status, CIMultiDict(stored.headers), stored.body)
