"""Quotas across regions: the master region's limits, usage summed over every
region, and reservations so that concurrent creates (in any gateway process)
cannot together exceed a limit.

Check and reserve happen in one transaction under a per-project lock row. A
reservation counts for every check until the region's own usage shows the
object: a check counts reservations still in flight and those settled after the
moment it started reading the regions' usage (a reading taken earlier may not
include them). Clocks of gateway hosts are assumed synchronised (NTP), as
OpenStack assumes everywhere.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import sqlalchemy as sa
from aiohttp import web
from sqlalchemy.engine import Engine

from isthmus.db import retry_transient, write_tx
from isthmus.gateway import schema
from isthmus.gateway.apis import Routed
from isthmus.gateway.call import Call, Settings
from isthmus.gateway.faults import Fault
from isthmus.gateway.forwarding import Forwarder
from isthmus.gateway.pools import BoundedPool
from isthmus.gateway.routing import Router

LOG = logging.getLogger(__name__)

# Limits change rarely and every change through the gateway drops the entry; a
# short TTL bounds staleness for changes made at the master directly.
LIMITS_TTL = 10.0
# A settled reservation is irrelevant once no reading can predate it.
SETTLED_KEEP = timedelta(seconds=120)
COMPUTE_WATCHED = ("instances", "cores", "ram")
VOLUME_WATCHED = ("volumes", "gigabytes")
_LIMIT_USAGE = ("totalInstancesUsed", "totalCoresUsed", "totalRAMUsed", "totalServerGroupsUsed",
                "totalFloatingIpsUsed", "totalSecurityGroupsUsed",  # Nova
                "totalVolumesUsed", "totalGigabytesUsed", "totalSnapshotsUsed", "totalBackupsUsed",
                "totalBackupGigabytesUsed")  # Cinder


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass
class Exceeded(Exception):
    resource: str
    limit: int
    used: int
    wanted: int


def units_that_fit(limits: dict[str, int], taken: dict[str, int], per_unit: dict[str, int],
                   least: int, most: int) -> int:
    """How many units, at most ``most``, fit under every limit (a negative or
    missing limit is none), as Nova sizes a multi-create; Exceeded below ``least``."""
    count = most
    for k, limit in limits.items():
        cost = per_unit.get(k, 0)
        if limit is None or limit < 0 or cost <= 0:
            continue
        count = min(count, max(limit - taken.get(k, 0), 0) // cost)
        if count < least:
            raise Exceeded(k, limit, taken.get(k, 0), cost * least)
    return count


class Reservations:
    """The reservation rows (any dialect; SQLite's write lock or a row lock serialises a project)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def reserve(self, service: str, project_id: str, limits: dict[str, int], used: dict[str, int],
                per_unit: dict[str, int], read_at: datetime, ttl: float,
                units: tuple[int, int] = (1, 1)) -> tuple[str, int]:
        """Reserve as many units (servers of a multi-create) as fit, from ``units``'
        most down to its least, each costing ``per_unit``; raise Exceeded when not
        even the least fits. Returns (reservation id, units reserved)."""
        reservation_id = str(uuid.uuid4())

        def attempt() -> tuple[str, int]:
            now = _now()
            with write_tx(self.engine) as conn:
                self._lock(conn, service, project_id)
                r = schema.quota_reservations
                conn.execute(r.delete().where(r.c.expires_at < now))
                rows = conn.execute(sa.select(r.c.deltas).where(
                    r.c.service == service, r.c.project_id == project_id,
                    sa.or_(r.c.settled_at.is_(None), r.c.settled_at >= read_at))).scalars()
                reserved = dict.fromkeys(per_unit, 0)
                for deltas in rows:
                    for k, v in json.loads(deltas).items():
                        if k in reserved:
                            reserved[k] += int(v)
                count = units_that_fit(limits, {k: used.get(k, 0) + reserved[k] for k in per_unit}, per_unit, *units)
                conn.execute(r.insert().values(id=reservation_id, service=service, project_id=project_id,
                                               deltas=json.dumps({k: v * count for k, v in per_unit.items()}),
                                               created_at=now, settled_at=None,
                                               expires_at=now + timedelta(seconds=ttl)))
            return reservation_id, count

        return retry_transient(attempt)

    def _lock(self, conn: sa.Connection, service: str, project_id: str) -> None:
        if conn.dialect.name == "sqlite":
            return  # BEGIN IMMEDIATE already holds the database's write lock
        locks = schema.quota_locks
        where = (locks.c.service == service, locks.c.project_id == project_id)
        if conn.execute(sa.select(locks.c.service).where(*where).with_for_update()).first() is None:
            try:
                with conn.begin_nested():
                    conn.execute(locks.insert().values(service=service, project_id=project_id))
            except sa.exc.IntegrityError:
                pass  # another process made it first
            conn.execute(sa.select(locks.c.service).where(*where).with_for_update())

    def settle(self, reservation_id: str, created: bool) -> None:
        """The region answered: nothing created (drop it), or created (count it
        until every later reading includes it)."""
        r = schema.quota_reservations

        def attempt() -> None:
            now = _now()
            with write_tx(self.engine) as conn:
                if created:
                    conn.execute(r.update().where(r.c.id == reservation_id)
                                 .values(settled_at=now, expires_at=now + SETTLED_KEEP))
                else:
                    conn.execute(r.delete().where(r.c.id == reservation_id))

        retry_transient(attempt)


@dataclass
class Ticket:
    """A reservation held by one create."""

    guard: QuotaGuard
    reservation_id: str
    units: int = 1  # servers of a multi-create the reservation covers

    async def settle(self, created: bool) -> None:
        await self.guard.background.run(self.guard.reservations.settle, self.reservation_id, created)


def usage_across_regions(regions, replies, watched, policy: str, scope: tuple[str, str],
                         last_known: dict[tuple[str, str, str], dict[str, int]]) -> dict[str, int]:
    """In-use plus reserved of each watched quota, summed over every region's
    quota detail. A region that did not answer counts as it last did (policy
    ``last_known``: the healthy regions keep creating, and each region's own
    limits, propagated from the master, still hold), or refuses (``refuse``)."""
    used = dict.fromkeys(watched, 0)
    for region, reply in zip(regions, replies, strict=True):
        key = (*scope, region)
        if isinstance(reply, BaseException) or reply.status != 200:
            if policy == "refuse":
                raise Fault(503, f"Quota usage cannot be counted: region {region} is unavailable.")
            counted = {k: last_known.get(key, {}).get(k, 0) for k in watched}
            LOG.warning("quota of %s: %s did not answer; counting its last known usage %s", scope[1], region, counted)
        else:
            detail = (reply.json() or {}).get("quota_set") or {}
            counted = {k: int((detail.get(k) or {}).get("in_use") or 0)
                       + int((detail.get(k) or {}).get("reserved") or 0)
                       for k in watched}
            last_known[key] = counted
        for k in used:
            used[k] += counted[k]
    return used


def _server_counts(server: dict) -> tuple[int, int]:
    """(min_count, max_count) of a server create; Nova answers malformed ones itself."""
    try:
        least = max(int(server.get("min_count") or 1), 1)
        most = max(int(server.get("max_count") or least), least)
    except (TypeError, ValueError):
        return 1, 1
    return least, most


class QuotaGuard:
    """Admits server and volume creates against the master's limits."""

    def __init__(self, settings: Settings, router: Router, fwd: Forwarder, background: BoundedPool,
                 reservations: Reservations) -> None:
        self.settings = settings
        self.router = router
        self.fwd = fwd
        self.background = background
        self.reservations = reservations
        self._limits: dict[tuple[str, str], tuple[float, dict]] = {}
        self._last_known: dict[tuple[str, str, str], dict[str, int]] = {}

    def limits_changed(self, service: str, project_id: str) -> None:
        self._limits.pop((service, project_id), None)

    async def admit(self, call: Call, spec: Routed, region: str, obj: dict) -> Ticket | None:
        """A before-create check: 403 (Nova) / 413 (Cinder) over the limit, else a
        ticket. A multi-create reserves every server it may make, its ``max_count``
        clamped to what fits (as Nova does within one region)."""
        if spec.kind == "server":
            least, most = _server_counts(obj)
            per_server = await self._server_costs(call, region, obj)
            ticket = await self._admit(call, "compute", COMPUTE_WATCHED, per_server, (least, most))
            if ticket is not None and ticket.units < most:
                LOG.info("%s: max_count %d clamped to %d (quota)", call.request_id, most, ticket.units)
                obj["max_count"] = ticket.units
            return ticket
        if spec.kind == "volume":
            try:
                wanted = {"volumes": 1, "gigabytes": int(obj.get("size") or 0)}
            except (TypeError, ValueError):
                return None  # Cinder rejects the size itself
            return await self._admit(call, "volume", VOLUME_WATCHED, wanted, (1, 1))
        return None

    async def _server_costs(self, call: Call, region: str, server: dict) -> dict[str, int]:
        """What one server costs: the flavor as the caller's token reads it at the
        master (or, for a flavor only the target region has, there). A flavor that
        cannot be read for an outage is a 503, never "0 cores"."""
        costs = {"instances": 1, "cores": 0, "ram": 0}
        flavor_ref = str(server.get("flavorRef") or "").rstrip("/").rsplit("/", 1)[-1]
        if not flavor_ref:
            return costs  # Nova answers for the missing flavorRef
        master = await self.router.master_region()
        for where in dict.fromkeys((master, region)):
            reply = await self.fwd.forward(call, where, "GET", call.rel_for("flavors", quote(flavor_ref, safe="")),
                                           body=b"", query="")
            if reply.status == 200:
                flavor = (reply.json() or {}).get("flavor") or {}
                costs["cores"], costs["ram"] = int(flavor.get("vcpus") or 0), int(flavor.get("ram") or 0)
                return costs
            if reply.status != 404:
                raise Fault(503, f"The flavor {flavor_ref} cannot be read in {where} ({reply.status}): "
                                 f"the quota cannot be checked.")
        return costs  # no such flavor: Nova answers 400 for it, nothing is made

    async def _limits_of(self, call: Call, service: str) -> dict:
        project = call.identity.project_id
        cached = self._limits.get((service, project))
        if cached and time.monotonic() - cached[0] < LIMITS_TTL:
            return cached[1]
        master = await self.router.master_region()
        quota = await self.fwd.forward(call, master, "GET", call.rel_for("os-quota-sets", project), body=b"",
                                       query="")
        if quota.status != 200:  # never "no limit" because the limits could not be read
            raise Fault(503, f"The quota limits cannot be read in the master region {master} ({quota.status}).")
        limits = (quota.json() or {}).get("quota_set") or {}
        self._limits[(service, project)] = (time.monotonic(), limits)
        return limits

    async def _admit(self, call: Call, service: str, watched_keys: tuple[str, ...],
                     per_unit: dict[str, int], units: tuple[int, int]) -> Ticket | None:
        limits = await self._limits_of(call, service)
        watched = {k: limits.get(k, -1) for k in watched_keys}
        if all(v is None or v < 0 for v in watched.values()):
            return None
        project = call.identity.project_id
        read_at = _now()
        regions = await self.router.regions()
        detail, query = ((call.rel_for("os-quota-sets", project, "detail"), "") if service == "compute"
                         else (call.rel_for("os-quota-sets", project), "usage=True"))
        replies = await asyncio.gather(*(self.fwd.forward(call, r, "GET", detail, body=b"", query=query,
                                                          timeout=self.settings.list_timeout)
                                         for r in regions), return_exceptions=True)
        used = usage_across_regions(regions, replies, watched, self.settings.quota_unreachable_region,
                                    (service, project), self._last_known)
        ttl = self.settings.request_timeout + 60
        try:
            reservation, count = await self.background.run(
                self.reservations.reserve, service, project, watched, used,
                {k: per_unit.get(k, 0) for k in watched}, read_at, ttl, units)
        except Exceeded as over:
            if service == "compute":
                raise Fault(403, f"Quota exceeded for {over.resource}: Requested {over.wanted}, but already used "
                                 f"{over.used} of {over.limit} {over.resource}") from None
            raise Fault(413, f"VolumeLimitExceeded: Maximum number of {over.resource} allowed ({over.limit}) "
                             f"exceeded across regions (in use {over.used}, requested {over.wanted}).") from None
        return Ticket(self, reservation, count)

    async def usage_summed(self, call: Call, kind: str) -> web.Response:
        """``/limits`` or ``/os-quota-sets/{p}/detail``: the master's limits with
        usage summed over every region."""
        master = await self.router.master_region()
        regions = await self.router.regions()
        replies = await asyncio.gather(*(self.fwd.forward(call, r, "GET", call.rel, body=b"",
                                                          timeout=self.settings.list_timeout) for r in regions),
                                       return_exceptions=True)
        by_region = dict(zip(regions, replies, strict=True))
        base = by_region.get(master)
        if isinstance(base, BaseException) or base is None:
            raise Fault(503, "The master region is unavailable.")
        if base.status != 200:
            return self.fwd.render(call, base, master)
        doc = base.json()
        for region, reply in by_region.items():
            if region == master:
                continue
            if isinstance(reply, BaseException) or reply.status != 200:
                LOG.warning("%s: usage of %s missing from %s", call.request_id, region, kind)
                continue
            other = reply.json()
            if kind == "quota_set":
                for key, entry in (other.get("quota_set") or {}).items():
                    mine = doc["quota_set"].get(key)
                    if isinstance(entry, dict) and isinstance(mine, dict):
                        for field in ("in_use", "reserved"):
                            mine[field] = int(mine.get(field) or 0) + int(entry.get(field) or 0)
            else:
                absolute = doc["limits"]["absolute"]
                for key in _LIMIT_USAGE:
                    if key in absolute:
                        absolute[key] = int(absolute[key] or 0) + int(other["limits"]["absolute"].get(key) or 0)
        return web.Response(status=200, body=json.dumps(doc).encode(), content_type="application/json")
