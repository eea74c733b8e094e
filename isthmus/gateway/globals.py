"""Global objects, written to the master region and spread to every region.

Flavors, keypairs, quotas and volume types are written through the gateway to the
master region (reads come from there too); a successful write enqueues a job per
object and ``isthmus-xjob`` runs the idempotent sync handlers (isthmus.gateway.sync).
Images are copied before a boot (isthmus.gateway.images). Availability zones come
from the region registry.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from urllib.parse import parse_qs

from isthmus.gateway import images
from isthmus.gateway.faults import Fault

LOG = logging.getLogger(__name__)

FLAVOR_SYNC = "gateway_flavor_sync"
KEYPAIR_SYNC = "gateway_keypair_sync"
QUOTA_SYNC = "gateway_quota_sync"
VOLUME_TYPE_SYNC = "gateway_volume_type_sync"


def install(gateway, conf, engine, session) -> None:
    from isthmus.jobs import JobStore

    store = JobStore(engine)

    def enqueue(job_type: str, resource_id: str, project_id: str | None, payload: dict | None = None):
        async def run() -> None:
            await gateway.background.run(store.enqueue, job_type, resource_id, project_id=project_id, payload=payload or {})
        return run()

    async def flavors(call, region, reply) -> None:
        segs = call.segments
        flavor_id = segs[1] if len(segs) > 1 else ((reply.json() or {}).get("flavor") or {}).get("id")
        if flavor_id:
            await enqueue(FLAVOR_SYNC, flavor_id, None, {"master": region})

    async def keypairs(call, region, reply) -> None:
        segs = call.segments
        user = (parse_qs(call.request.query_string).get("user_id") or [call.identity.user_id])[0]
        name = segs[1] if len(segs) > 1 else ((reply.json() or {}).get("keypair") or {}).get("name")
        if name:
            await enqueue(KEYPAIR_SYNC, f"{user}/{name}", call.identity.project_id, {"master": region})

    async def quotas(call, region, reply) -> None:
        if len(call.segments) > 1:
            _LIMITS.pop(("compute", call.segments[1]), None)
            await enqueue(QUOTA_SYNC, call.segments[1], call.segments[1], {"master": region})

    async def volume_types(call, region, reply) -> None:
        doc = reply.json() if reply.body else None
        type_id = call.segments[1] if len(call.segments) > 1 else ((doc or {}).get("volume_type") or {}).get("id")
        if type_id:
            name = ((doc or {}).get("volume_type") or {}).get("name", "")
            await enqueue(VOLUME_TYPE_SYNC, type_id, None, {"name": name, "master": region})

    gateway.write_hooks.setdefault(("compute", "flavors"), []).append(flavors)
    gateway.write_hooks.setdefault(("compute", "os-keypairs"), []).append(keypairs)
    gateway.write_hooks.setdefault(("compute", "os-quota-sets"), []).append(quotas)
    gateway.write_hooks.setdefault(("volume", "types"), []).append(volume_types)

    async def volume_quotas(call, region, reply) -> None:
        if len(call.segments) > 1:
            _LIMITS.pop(("volume", call.segments[1]), None)
            await enqueue(QUOTA_SYNC, f"volume/{call.segments[1]}", call.segments[1],
                          {"master": region, "service": "volume"})

    gateway.write_hooks.setdefault(("volume", "os-quota-sets"), []).append(volume_quotas)

    async def global_quota(call, spec, region, body) -> None:
        """Instances, cores and RAM (volumes, gigabytes) count across every region
        against the master's limits."""
        if spec.kind == "server":
            await enforce_quota(gateway, call, body)
        elif spec.kind == "volume":
            await enforce_volume_quota(gateway, call, body)

    gateway.before_create.append(global_quota)

    async def volume_type_in_region(call, spec, region, volume) -> None:
        """A volume type created at the master exists in the target region before the create."""
        wanted = volume.get("volume_type")
        if spec.kind != "volume" or not wanted:
            return
        master = await gateway.router.master_region()
        if region == master:
            return
        from isthmus.gateway.sync import Regions, sync_volume_type
        from isthmus.jobs import JobContext
        ctx = JobContext("inline", VOLUME_TYPE_SYNC, str(wanted), None,
                         {"master": master, "only": region, "name": str(wanted), "inline": True}, 1)
        try:
            await gateway.background.run(sync_volume_type, Regions.fixed(session, lambda: [master, region]), ctx)
        except Exception as err:  # noqa: BLE001 - Cinder reports an unknown type itself
            LOG.warning("%s: syncing volume type %s to %s failed: %s", call.request_id, wanted, region, err)

    gateway.before_create.append(volume_type_in_region)

    async def confirm_absent(api: str, region: str, path: str) -> bool:
        from isthmus.gateway.sync import Regions
        service = Regions.fixed(session, lambda: [region])
        reply = await gateway.background.run(service.call, "GET", region, api, path)
        return reply.status_code == 404

    gateway.confirm_absent = confirm_absent

    async def quota_sets(call):
        segs = call.segments
        if call.method == "GET" and len(segs) == 3 and segs[2] == "detail":
            return await aggregated_usage(gateway, call, "quota_set")
        return await gateway.to_master(call)

    async def limits(call):
        if call.method == "GET" and len(call.segments) == 1:
            return await aggregated_usage(gateway, call, "limits")
        return await gateway.to_master(call)

    gateway.local_handlers[("compute", "os-quota-sets")] = quota_sets
    gateway.local_handlers[("compute", "limits")] = limits
    gateway.local_handlers[("volume", "limits")] = limits  # Cinder's usage summed over regions too

    if conf.gateway.replicate_images:
        async def copy_images(call, spec, region, server) -> None:
            if spec.kind != "server":
                return
            master = await gateway.router.master_region()
            if region == master:
                return
            flavor = str(server.get("flavorRef") or "").rstrip("/").rsplit("/", 1)[-1]
            if flavor and not _SAFE_ID.match(flavor):
                raise Fault(400, f"Invalid input for field/attribute flavorRef: {flavor!r} is not a flavor id.")
            # Service credentials act only on what the caller may use with its own
            # token: a flavor it can see at the master, an image it can see there.
            if flavor and await _caller_sees(gateway, call, master, "flavors", flavor):
                # The flavor job may not have run yet: make this one region match now
                # (inline: it only ever creates; a user request never deletes anything).
                from isthmus.gateway.sync import Regions, sync_flavor
                from isthmus.jobs import JobContext
                ctx = JobContext("inline", FLAVOR_SYNC, flavor, None,
                                 {"master": master, "only": region, "inline": True}, 1)
                try:
                    await gateway.background.run(sync_flavor, Regions.fixed(session, lambda: [master, region]), ctx)
                except Exception as err:  # noqa: BLE001
                    LOG.warning("%s: syncing flavor %s to %s failed: %s", call.request_id, flavor, region, err)
            for image_id in images.image_refs(server):
                if not images.is_image_id(image_id):
                    raise Fault(400, f"Invalid input for field/attribute imageRef: {image_id!r} is not an image id.")
                interface = conf.service_credentials.interface
                try:
                    if not await gateway.background.run(images.visible_to, session, image_id, master,
                                                   call.identity.token, interface):
                        continue  # not the caller's to use: Nova answers for it
                    await gateway.background.run(images.ensure_image, session, image_id, master, region, interface)
                except Exception as err:  # noqa: BLE001 - Nova reports a missing image itself
                    LOG.warning("%s: copying image %s to %s failed: %s", call.request_id, image_id, region, err)
        gateway.before_create.append(copy_images)



# Nova flavor ids: any string, but only these characters ever reach a URL here.
_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{1,255}$")


async def _caller_sees(gateway, call, region: str, collection: str, object_id: str) -> bool:
    """Whether the caller's own token can read the object (service credentials
    then act on it, never on what the caller could not see)."""
    reply = await gateway._forward(call, region, "GET", call.rel_for(collection, object_id), body=b"", query="")
    return reply.status == 200


# Limits change rarely and every change through the gateway drops the entry; a
# short TTL bounds staleness for changes made at the master directly.
LIMITS_TTL = 10.0
_LIMITS: dict[tuple[str, str], tuple[float, dict]] = {}


async def enforce_quota(gateway, call, server: dict) -> None:
    from isthmus.gateway.faults import Fault

    project = call.identity.project_id
    cached = _LIMITS.get(("compute", project))
    if cached and time.monotonic() - cached[0] < LIMITS_TTL:
        limits = cached[1]
    else:
        master = await gateway.router.master_region()
        quota = await gateway._forward(call, master, "GET", call.rel_for("os-quota-sets", project), body=b"",
                                       query="")
        if quota.status != 200:
            return
        limits = (quota.json() or {}).get("quota_set") or {}
        _LIMITS[("compute", project)] = (time.monotonic(), limits)
    master = await gateway.router.master_region()
    watched = {k: limits.get(k, -1) for k in ("instances", "cores", "ram")}
    if all(v is None or v < 0 for v in watched.values()):
        return
    count = max(int(server.get("min_count") or 1), 1)
    wanted = {"instances": count, "cores": 0, "ram": 0}
    flavor_ref = str(server.get("flavorRef") or "").rstrip("/").rsplit("/", 1)[-1]
    if flavor_ref:
        reply = await gateway._forward(call, master, "GET", call.rel_for("flavors", flavor_ref), body=b"", query="")
        if reply.status == 200:
            flavor = (reply.json() or {}).get("flavor") or {}
            wanted["cores"] = count * int(flavor.get("vcpus") or 0)
            wanted["ram"] = count * int(flavor.get("ram") or 0)
    regions = await gateway.router.regions()
    replies = await asyncio.gather(*(gateway._forward(call, r, "GET", call.rel_for("os-quota-sets", project, "detail"),
                                                      body=b"", query="", timeout=gateway.settings.list_timeout)
                                     for r in regions), return_exceptions=True)
    used = _usage_across_regions(regions, replies, watched, gateway.settings.quota_unreachable_region,
                                 ("compute", project))
    for key, limit in watched.items():
        if limit is not None and limit >= 0 and used[key] + wanted[key] > limit:
            raise Fault(403, f"Quota exceeded for {key}: Requested {wanted[key]}, but already used {used[key]} "
                        f"of {limit} {key}")


_LIMIT_USAGE = ("totalInstancesUsed", "totalCoresUsed", "totalRAMUsed", "totalServerGroupsUsed",
                "totalFloatingIpsUsed", "totalSecurityGroupsUsed",  # Nova
                "totalVolumesUsed", "totalGigabytesUsed", "totalSnapshotsUsed", "totalBackupsUsed",
                "totalBackupGigabytesUsed")  # Cinder


async def aggregated_usage(gateway, call, kind: str):
    """The master's limits with usage summed over every region."""
    from aiohttp import web

    from isthmus.gateway.faults import Fault

    master = await gateway.router.master_region()
    regions = await gateway.router.regions()
    replies = await asyncio.gather(*(gateway._forward(call, r, "GET", call.rel, body=b"",
                                                      timeout=gateway.settings.list_timeout) for r in regions),
                                   return_exceptions=True)
    by_region = dict(zip(regions, replies))
    base = by_region.get(master)
    if isinstance(base, BaseException) or base is None:
        raise Fault(503, "The master region is unavailable.")
    if base.status != 200:
        return gateway._render(call, base, master)
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


async def enforce_volume_quota(gateway, call, volume: dict) -> None:
    """Volumes and gigabytes summed over every region against the master's limits (413,
    Cinder's over-limit status)."""
    from isthmus.gateway.faults import Fault

    project = call.identity.project_id
    cached = _LIMITS.get(("volume", project))
    if cached and time.monotonic() - cached[0] < LIMITS_TTL:
        limits = cached[1]
    else:
        master = await gateway.router.master_region()
        quota = await gateway._forward(call, master, "GET", call.rel_for("os-quota-sets", project), body=b"",
                                       query="")
        if quota.status != 200:
            return
        limits = (quota.json() or {}).get("quota_set") or {}
        _LIMITS[("volume", project)] = (time.monotonic(), limits)
    watched = {k: limits.get(k, -1) for k in ("volumes", "gigabytes")}
    if all(v is None or v < 0 for v in watched.values()):
        return
    try:
        wanted = {"volumes": 1, "gigabytes": int(volume.get("size") or 0)}
    except (TypeError, ValueError):
        return  # Cinder rejects the size itself
    regions = await gateway.router.regions()
    replies = await asyncio.gather(*(gateway._forward(call, r, "GET", call.rel_for("os-quota-sets", project),
                                                      body=b"", query="usage=True",
                                                      timeout=gateway.settings.list_timeout)
                                     for r in regions), return_exceptions=True)
    used = _usage_across_regions(regions, replies, watched, gateway.settings.quota_unreachable_region,
                                 ("volume", project))
    for key, limit in watched.items():
        if limit is not None and limit >= 0 and used[key] + wanted[key] > limit:
            raise Fault(413, f"VolumeLimitExceeded: Maximum number of {key} allowed ({limit}) exceeded "
                        f"across regions (in use {used[key]}, requested {wanted[key]}).")


# (service, project, region) -> that region's usage when it last answered.
_REGION_USAGE: dict[tuple[str, str, str], dict[str, int]] = {}


def _usage_across_regions(regions, replies, watched, policy: str, scope: tuple[str, str]) -> dict[str, int]:
    """In-use plus reserved of each watched quota, summed over every region's
    quota detail. A region that did not answer counts as it last did (policy
    ``last_known``: the healthy regions keep creating, and each region's own
    limits, propagated from the master, still hold), or refuses (``refuse``)."""
    from isthmus.gateway.faults import Fault  # imported late, as the callers do

    used = dict.fromkeys(watched, 0)
    for region, reply in zip(regions, replies):
        key = (*scope, region)
        if isinstance(reply, BaseException) or reply.status != 200:
            if policy == "refuse":
                raise Fault(503, f"Quota usage cannot be counted: region {region} is unavailable.")
            counted = {k: _REGION_USAGE.get(key, {}).get(k, 0) for k in watched}
            LOG.warning("quota of %s: %s did not answer; counting its last known usage %s", scope[1], region, counted)
        else:
            detail = (reply.json() or {}).get("quota_set") or {}
            counted = {k: int((detail.get(k) or {}).get("in_use") or 0) + int((detail.get(k) or {}).get("reserved") or 0)
                       for k in watched}
            _REGION_USAGE[key] = counted
        for k in used:
            used[k] += counted[k]
    return used
