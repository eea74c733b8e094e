"""Global objects, written to the master region and spread to every region.

Flavors, keypairs, quotas and volume types are written through the gateway to the
master region (reads come from there too); a successful write enqueues a job per
object and ``isthmus-xjob`` runs the idempotent sync handlers (isthmus.gateway.sync).
Images are copied before a boot (isthmus.gateway.images). Availability zones come
from the region registry.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from isthmus.gateway import images
from isthmus.gateway.apis import Routed
from isthmus.gateway.call import Call
from isthmus.gateway.faults import Fault
from isthmus.gateway.forwarding import Forwarder
from isthmus.gateway.pools import AdmissionPool, BoundedPool, Busy
from isthmus.gateway.proxy import Reply
from isthmus.gateway.quotas import QuotaGuard
from isthmus.gateway.routing import Router
from isthmus.gateway.sync import (
    FLAVOR_SYNC,
    KEYPAIR_SYNC,
    QUOTA_SYNC,
    VOLUME_TYPE_SYNC,
    Regions,
    sync_flavor,
    sync_volume_type,
)
from isthmus.jobs import JobContext, JobStore

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class GlobalObjects:
    """The write hooks that spread global objects (each write enqueues one sync job),
    the inline volume-type copy before a volume create, and the service-credential
    check that a routed object is really gone."""

    router: Router
    fwd: Forwarder
    background: BoundedPool
    store: JobStore
    quotas: QuotaGuard  # a write of a project's limits resets its cached limits
    session: Any  # keystoneauth session of the service credentials

    async def _enqueue(self, job_type: str, resource_id: str, project_id: str | None, payload: dict) -> None:
        await self.background.run(self.store.enqueue, job_type, resource_id, project_id=project_id, payload=payload)

    # --- write hooks (after a successful write at the master region) ------------------
    async def flavor_written(self, call: Call, region: str, reply: Reply) -> None:
        segs = call.segments
        flavor_id = segs[1] if len(segs) > 1 else ((reply.json() or {}).get("flavor") or {}).get("id")
        if flavor_id:
            await self._enqueue(FLAVOR_SYNC, flavor_id, None, {"master": region})

    async def keypair_written(self, call: Call, region: str, reply: Reply) -> None:
        segs = call.segments
        doc = (reply.json() or {}).get("keypair") or {}
        user = keypair_owner(call.method, call.request.query_string, call.identity, doc)
        name = segs[1] if len(segs) > 1 else doc.get("name")
        if name:
            await self._enqueue(KEYPAIR_SYNC, f"{user}/{name}", call.identity.project_id, {"master": region})

    async def compute_quotas_written(self, call: Call, region: str, reply: Reply) -> None:
        if len(call.segments) > 1:
            self.quotas.limits_changed("compute", call.segments[1])
            await self._enqueue(QUOTA_SYNC, call.segments[1], call.segments[1], {"master": region})

    async def volume_quotas_written(self, call: Call, region: str, reply: Reply) -> None:
        if len(call.segments) > 1:
            self.quotas.limits_changed("volume", call.segments[1])
            await self._enqueue(QUOTA_SYNC, f"volume/{call.segments[1]}", call.segments[1],
                                {"master": region, "service": "volume"})

    async def volume_type_written(self, call: Call, region: str, reply: Reply) -> None:
        doc = reply.json() if reply.body else None
        type_id = call.segments[1] if len(call.segments) > 1 else ((doc or {}).get("volume_type") or {}).get("id")
        if type_id:
            name = ((doc or {}).get("volume_type") or {}).get("name", "")
            await self._enqueue(VOLUME_TYPE_SYNC, type_id, None, {"name": name, "master": region})

    # --- before a create ----------------------------------------------------------
    async def volume_type_in_region(self, call: Call, spec: Routed, region: str, volume: dict) -> None:
        """A volume type created at the master exists in the target region before the create."""
        wanted = volume.get("volume_type")
        if spec.kind != "volume" or not wanted:
            return
        master = await self.router.master_region()
        if region == master:
            return
        # Service credentials act only on a type the caller's own token can read.
        if not await _caller_sees_volume_type(self.fwd, call, master, str(wanted)):
            return  # Cinder answers for a type the caller may not use
        ctx = JobContext("inline", VOLUME_TYPE_SYNC, str(wanted), None,
                         {"master": master, "only": region, "name": str(wanted), "inline": True}, 1)
        try:
            await self.background.run(sync_volume_type, Regions.fixed(self.session, lambda: [master, region]), ctx)
        except Exception as err:  # noqa: BLE001 - Cinder reports an unknown type itself
            LOG.warning("%s: syncing volume type %s to %s failed: %s", call.request_id, wanted, region, err)

    # --- a routed object answered 404 -----------------------------------------------
    async def confirm_absent(self, api: str, region: str, path: str) -> bool:
        service = Regions.fixed(self.session, lambda: [region])
        reply = await self.background.run(service.call, "GET", region, api, path)
        return reply.status_code == 404


class ImageCopies:
    """Before a boot in a region other than the master: the flavor synced there
    now and each image copied there (``[gateway] replicate_images``)."""

    def __init__(self, conf, router: Router, fwd: Forwarder, background: BoundedPool, session) -> None:
        self.router = router
        self.fwd = fwd
        self.background = background
        self.session = session
        self.interface = conf.service_credentials.interface
        self.timeout = conf.gateway.image_copy_timeout
        # Image copies get their own pool, bounded and refusing when full: a burst of
        # large copies never stalls the quota checks and DB writes of other tenants.
        self.pool = AdmissionPool(conf.gateway.image_copy_workers, conf.gateway.image_copy_queue, "gateway-images")

    async def copy_images(self, call: Call, spec: Routed, region: str, server: dict) -> None:
        if spec.kind != "server":
            return
        master = await self.router.master_region()
        if region == master:
            return
        flavor = str(server.get("flavorRef") or "").rstrip("/").rsplit("/", 1)[-1]
        if flavor and not _SAFE_ID.match(flavor):
            raise Fault(400, f"Invalid input for field/attribute flavorRef: {flavor!r} is not a flavor id.")
        # Service credentials act only on what the caller may use with its own
        # token: a flavor it can see at the master, an image it can see there.
        if flavor and await _caller_sees(self.fwd, call, master, "flavors", flavor):
            await self._sync_flavor(call, flavor, master, region)
        for image_id in images.image_refs(server):
            if not images.is_image_id(image_id):
                raise Fault(400, f"Invalid input for field/attribute imageRef: {image_id!r} is not an image id.")
            await self._copy_image(call, image_id, master, region)

    async def _sync_flavor(self, call: Call, flavor: str, master: str, region: str) -> None:
        """The flavor job may not have run yet: make this one region match now
        (inline: it only ever creates; a user request never deletes anything)."""
        ctx = JobContext("inline", FLAVOR_SYNC, flavor, None, {"master": master, "only": region, "inline": True}, 1)
        try:
            await self.background.run(sync_flavor, Regions.fixed(self.session, lambda: [master, region]), ctx)
        except Exception as err:  # noqa: BLE001 - logged; Nova reports a missing flavor itself
            LOG.warning("%s: syncing flavor %s to %s failed: %s", call.request_id, flavor, region, err)

    async def _copy_image(self, call: Call, image_id: str, master: str, region: str) -> None:
        try:
            if not await self.background.run(images.visible_to, self.session, image_id, master,
                                             call.identity.token, self.interface):
                return  # not the caller's to use: Nova answers for it
            await asyncio.wait_for(
                self.pool.run(images.ensure_image, self.session, image_id, master, region, self.interface),
                self.timeout)
        except Busy:
            raise Fault(503, f"Too many image copies to {region} under way; retry later.") from None
        except TimeoutError:
            raise Fault(503, f"The copy of image {image_id} to {region} is still under way; retry later.") from None
        except Exception as err:  # noqa: BLE001 - Nova reports a missing image itself
            LOG.warning("%s: copying image %s to %s failed: %s", call.request_id, image_id, region, err)


# Nova flavor ids: any string, but only these characters ever reach a URL here.
_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{1,255}$")


def keypair_owner(method: str, query_string: str, identity, reply: dict) -> str:
    """Whose keypair a successful write changed: the reply's ``user_id`` (a create
    names it); for a delete, ``?user_id=`` only from an admin (as Nova honours it);
    otherwise the caller. A non-admin never names someone else's keypair here."""
    if reply.get("user_id"):
        return str(reply["user_id"])
    named = parse_qs(query_string).get("user_id")
    if method == "DELETE" and named and identity.is_admin:
        return named[0]
    return identity.user_id


async def _caller_sees_volume_type(fwd: Forwarder, call: Call, region: str, wanted: str) -> bool:
    """Whether the caller's token lists the type (by id or name) at ``region``:
    Cinder's GET by id takes no name, and a list shows a user exactly the public
    types and the private ones shared with its project."""
    reply = await fwd.forward(call, region, "GET", call.rel_for("types"), body=b"", query="is_public=None")
    if reply.status != 200:
        return False
    return any(wanted in (t.get("id"), t.get("name")) for t in (reply.json() or {}).get("volume_types") or [])


async def _caller_sees(fwd: Forwarder, call: Call, region: str, collection: str, object_id: str) -> bool:
    """Whether the caller's own token can read the object (service credentials
    then act on it, never on what the caller could not see)."""
    reply = await fwd.forward(call, region, "GET", call.rel_for(collection, object_id), body=b"", query="")
    return reply.status == 200
