"""Quotas across regions: the master region's limits, usage summed over every
region, and reservations so that concurrent creates (in any gateway process)
cannot together exceed a limit.

Check and reserve happen in one transaction under a per-project lock row. A
reservation counts for every check until the region's own usage shows the
object: a check counts reservations still in flight and those settled after the
moment it started reading the regions' usage (a reading taken earlier may not
include them). A volume is in Cinder's usage when its create answers. A server
is in Nova's only once the conductor has written it to a cell, a moment after the
202 (until then it is a build request, which no usage shows): its reservation
keeps counting until a check sees Nova's record of it (``nova_has_it``), and
from then on counts only for readings started before that sight. Clocks of
gateway hosts are assumed synchronised (NTP), as OpenStack assumes everywhere.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, urlencode

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
from isthmus.gateway.proxy import Reply
from isthmus.gateway.routing import Router

LOG = logging.getLogger(__name__)

# Limits change rarely and every change through the gateway drops the entry; a
# short TTL bounds staleness for changes made at the master directly.
LIMITS_TTL = 10.0
# A settled reservation is irrelevant once no reading can predate it.
SETTLED_KEEP = timedelta(seconds=120)
COMPUTE_WATCHED = ("instances", "cores", "ram")
# Server creates awaiting Nova's count looked up per check (the rest keep counting).
MAX_LOOKUPS = 20
# A refusal that may come from counting a server twice reads again (bounded):
# at once when a create was just settled, after a pause when one is still
# unconfirmed (Nova counts a server a moment before it records its create action).
_ATTEMPTS = 4
_RECHECK_PAUSE = 0.5
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

    def await_count(self, reservation_id: str, region: str, watch: dict[str, str], ttl: float) -> None:
        """The region made it (202) but its usage does not show it yet: keep
        counting it, for at most ``ttl``, until ``settle_counted``."""
        r = schema.quota_reservations

        def attempt() -> None:
            with write_tx(self.engine) as conn:
                conn.execute(r.update().where(r.c.id == reservation_id)
                             .values(region=region, watch=json.dumps(watch),
                                     expires_at=_now() + timedelta(seconds=ttl)))

        retry_transient(attempt)

    def awaiting(self, service: str, project_id: str) -> list[Awaiting]:
        """The project's creates answered and not yet counted by their region."""
        r = schema.quota_reservations
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(r.c.id, r.c.region, r.c.watch).where(
                r.c.service == service, r.c.project_id == project_id, r.c.watch.is_not(None),
                r.c.settled_at.is_(None), r.c.expires_at >= _now())).all()
        return [Awaiting(row.id, row.region, json.loads(row.watch)) for row in rows]

    def settle_counted(self, reservation_ids: list[str], seen_at: datetime) -> None:
        """Their region counted them at ``seen_at``: every reading started later shows them."""
        if not reservation_ids:
            return
        r = schema.quota_reservations

        def attempt() -> None:
            with write_tx(self.engine) as conn:
                conn.execute(r.update().where(r.c.id.in_(reservation_ids), r.c.settled_at.is_(None))
                             .values(settled_at=seen_at, expires_at=seen_at + SETTLED_KEEP))

        retry_transient(attempt)


@dataclass(frozen=True)
class Awaiting:
    """A server create's reservation waiting for Nova to count what it made."""

    reservation_id: str
    region: str
    watch: dict[str, str]  # {"server": id} or {"reservation_id": r}


def nova_has_it(instance_actions: dict) -> bool:
    """Whether a server's ``os-instance-actions`` show that Nova counts it: the
    conductor records the create action in the cell a moment after it wrote the
    server there (cell databases, or Placement's allocations made before, are
    what Nova's usage counts; a check refused in that moment reads again, see
    ``_ATTEMPTS``), and it writes every server of one create before it records
    any action. A build request has no actions yet."""
    return bool(instance_actions.get("instanceActions"))


@dataclass
class Ticket:
    """A reservation held by one create."""

    guard: QuotaGuard
    reservation_id: str
    units: int = 1  # servers of a multi-create the reservation covers
    service: str = "compute"
    region: str = ""
    ttl: float = 60.0

    async def settle(self, created: bool, reply: Reply | None = None) -> None:
        watch = _watch_of(reply) if created and self.service == "compute" and reply is not None else None
        if watch is not None:
            await self.guard.background.run(self.guard.reservations.await_count, self.reservation_id,
                                            self.region, watch, self.ttl)
            return
        await self.guard.background.run(self.guard.reservations.settle, self.reservation_id, created)


def _watch_of(reply: Reply) -> dict[str, str] | None:
    """How to find what a server create made, from its 2xx reply (None: not a 2xx
    or nothing to find it by, settled at once as before)."""
    if not (200 <= reply.status < 300 and reply.is_json):
        return None
    doc = reply.json() or {}
    server = doc.get("server")
    server_id = server.get("id") if isinstance(server, dict) else None
    if isinstance(server_id, str) and server_id:
        return {"server": server_id}  # a multi-create's first answers for all: see nova_has_it
    if isinstance(doc.get("reservation_id"), str) and doc["reservation_id"]:
        return {"reservation_id": doc["reservation_id"]}
    return None


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
            ticket = await self._admit(call, region, "compute", COMPUTE_WATCHED, per_server, (least, most))
            if ticket is not None and ticket.units < most:
                LOG.info("%s: max_count %d clamped to %d (quota)", call.request_id, most, ticket.units)
                obj["max_count"] = ticket.units
            return ticket
        if spec.kind == "volume":
            try:
                wanted = {"volumes": 1, "gigabytes": int(obj.get("size") or 0)}
            except (TypeError, ValueError):
                return None  # Cinder rejects the size itself
            return await self._admit(call, region, "volume", VOLUME_WATCHED, wanted, (1, 1))
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

    async def _admit(self, call: Call, region: str, service: str, watched_keys: tuple[str, ...],
                     per_unit: dict[str, int], units: tuple[int, int]) -> Ticket | None:
        limits = await self._limits_of(call, service)
        watched = {k: limits.get(k, -1) for k in watched_keys}
        if all(v is None or v < 0 for v in watched.values()):
            return None
        project = call.identity.project_id
        for attempt in range(_ATTEMPTS):
            read_at = _now()
            used = await self._usage(call, service, project, watched)
            # After the reading: a server seen in Nova now may not have been in
            # the reading; counted here, settled for every later check.
            settled, unconfirmed = (await self._settle_counted(call, project) if service == "compute"
                                    else (0, 0))
            again = attempt + 1 < _ATTEMPTS and bool(settled or unconfirmed)
            ttl = self.settings.request_timeout + 60
            try:
                reservation, count = await self.background.run(
                    self.reservations.reserve, service, project, watched, used,
                    {k: per_unit.get(k, 0) for k in watched}, read_at, ttl, units)
            except Exceeded as over:
                if again:
                    await self._pause_unless(settled)
                    continue  # what is counted twice may be in the reading too: read again
                if service == "compute":
                    raise Fault(403, f"Quota exceeded for {over.resource}: Requested {over.wanted}, but already "
                                     f"used {over.used} of {over.limit} {over.resource}") from None
                raise Fault(413, f"VolumeLimitExceeded: Maximum number of {over.resource} allowed ({over.limit}) "
                                 f"exceeded across regions (in use {over.used}, requested {over.wanted}).") from None
            if again and count < units[1]:
                await self.background.run(self.reservations.settle, reservation, False)
                await self._pause_unless(settled)
                continue  # a multi-create clamped by what may be counted twice: read again
            return Ticket(self, reservation, count, service, region, ttl)
        raise AssertionError("unreachable")

    async def _usage(self, call: Call, service: str, project: str, watched: dict[str, int]) -> dict[str, int]:
        regions = await self.router.regions()
        detail, query = ((call.rel_for("os-quota-sets", project, "detail"), "") if service == "compute"
                         else (call.rel_for("os-quota-sets", project), "usage=True"))
        replies = await asyncio.gather(*(self.fwd.forward(call, r, "GET", detail, body=b"", query=query,
                                                          timeout=self.settings.list_timeout)
                                         for r in regions), return_exceptions=True)
        return usage_across_regions(regions, replies, watched, self.settings.quota_unreachable_region,
                                    (service, project), self._last_known)

    @staticmethod
    async def _pause_unless(settled: int) -> None:
        """Before reading again: none if a create was just settled (the next reading
        is later than its settling), else give Nova a moment to record the create."""
        if not settled:
            await asyncio.sleep(_RECHECK_PAUSE)

    async def _settle_counted(self, call: Call, project: str) -> tuple[int, int]:
        """Settle the project's server creates Nova counts by now: how many were
        settled, how many still wait. The time of settling is taken after the
        lookups: a reading started before then may have missed the server and
        still counts its reservation. One that still waits may be in the reading
        already (the conductor writes the server, then records its action)."""
        waiting = await self.background.run(self.reservations.awaiting, "compute", project)
        if not waiting:
            return 0, 0
        looked = await asyncio.gather(*(self._has_it(call, one) for one in waiting[:MAX_LOOKUPS]),
                                      return_exceptions=True)
        counted = [one.reservation_id for one, yes in zip(waiting, looked, strict=False) if yes is True]
        await self.background.run(self.reservations.settle_counted, counted, _now())
        return len(counted), len(waiting) - len(counted)

    async def _has_it(self, call: Call, one: Awaiting) -> bool:
        """Whether Nova counts what this create made (False when it cannot tell:
        a region that cannot be read keeps the reservation, since refusing a
        create that fits is recoverable and overshooting is not)."""
        server_id = one.watch.get("server")
        if server_id is None:  # return_reservation_id: any of its servers answers for all
            reply = await self.fwd.forward(call, one.region, "GET", call.rel_for("servers"), body=b"",
                                           query=urlencode({"reservation_id": one.watch.get("reservation_id", "")}),
                                           timeout=self.settings.list_timeout)
            if reply.status != 200:
                return False
            servers = [s for s in (reply.json() or {}).get("servers") or [] if isinstance(s, dict)]
            if not servers:
                return True  # deleted already: nothing left to count
            server_id = str(servers[0].get("id"))
        reply = await self.fwd.forward(call, one.region, "GET",
                                       call.rel_for("servers", quote(server_id, safe=""), "os-instance-actions"),
                                       body=b"", query="", timeout=self.settings.list_timeout)
        if reply.status == 404:
            return True  # deleted already
        return reply.status == 200 and nova_has_it(reply.json() or {})

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
