"""Per-user quotas (``os-quota-sets/{project}?user_id=``) in every region.

Nova keeps a project's limits and, beside them, limits of one user inside the
project. Reads (``/defaults``, ``?user_id=``, ``/detail?user_id=``,
``/limits?tenant_id=``, Cinder's ``?usage=true``) go to the master, with usage
summed over regions; a write of a user's limits goes to the master too, then a
job gives each region the same user limits (``sync.sync_user_quota``), so each
region's Nova holds them for what is created there (the gateway's global check
counts the project's limits across regions).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from urllib.parse import parse_qs

from aiohttp import web

from isthmus.gateway.call import Call
from isthmus.gateway.core import MasterRegion
from isthmus.gateway.faults import Fault
from isthmus.gateway.pools import BoundedPool
from isthmus.gateway.proxy import Reply
from isthmus.gateway.quotas import QuotaGuard
from isthmus.gateway.sync import USER_QUOTA_SYNC
from isthmus.jobs import JobStore

LOG = logging.getLogger(__name__)

# Keystone ids (32 hex) and LDAP-backed ones: nothing that could leave the query.
_USER_ID = re.compile(r"^[A-Za-z0-9._@-]{1,255}$")


@dataclass(frozen=True)
class UserQuotaWrite:
    project_id: str
    user_id: str
    keys: tuple[str, ...]  # what a PUT named (empty for a DELETE)
    deleted: bool


def user_quota_write(segments: list[str], query_string: str, method: str, body: bytes) -> UserQuotaWrite | None:
    """A write of one user's limits (``PUT``/``DELETE /os-quota-sets/{p}?user_id=u``), else None."""
    if method not in ("PUT", "DELETE") or len(segments) != 2:
        return None
    users = parse_qs(query_string).get("user_id")
    if not users:
        return None
    user = users[0]
    checked_user_id(query_string)
    keys: tuple[str, ...] = ()
    if method == "PUT":
        try:
            quota_set = json.loads(body or b"null")["quota_set"]
            keys = tuple(sorted(k for k in quota_set if k != "force"))
        except (ValueError, KeyError, TypeError, RecursionError):
            return None  # the master refused it already
    return UserQuotaWrite(segments[1], user, keys, method == "DELETE")


def job_resource(write: UserQuotaWrite) -> str:
    return f"{write.project_id}/{write.user_id}"


def checked_user_id(query_string: str) -> None:
    """A ``user_id`` query parameter that is not a user id: 400 naming it, before any region."""
    for user in parse_qs(query_string, keep_blank_values=True).get("user_id") or ():
        if not _USER_ID.match(user):
            raise Fault(400, f"Invalid input for field/attribute user_id: {user!r} is not a user id.")


def wants_usage(query_string: str) -> bool:
    """Cinder's ``?usage=true`` (its quota detail); Cinder answers a malformed value itself."""
    from oslo_utils import strutils

    values = parse_qs(query_string, keep_blank_values=True).get("usage") or ["false"]
    return strutils.bool_from_string(values[-1])


class QuotaViews:
    """``os-quota-sets`` and ``limits`` as one cloud: usage summed over regions
    (Nova's ``/detail``, Cinder's ``?usage=true``, ``limits``), everything else
    (limits, defaults, writes) at the master region."""

    def __init__(self, quotas: QuotaGuard, master: MasterRegion) -> None:
        self.quotas = quotas
        self.master = master

    async def compute_quota_sets(self, call: Call) -> web.StreamResponse:
        checked_user_id(call.request.query_string)
        segs = call.segments
        if call.method == "GET" and len(segs) == 3 and segs[2] == "detail":
            return await self.quotas.usage_summed(call, "quota_set")
        return await self.master.forward(call)

    async def volume_quota_sets(self, call: Call) -> web.StreamResponse:
        if call.method == "GET" and len(call.segments) == 2 and wants_usage(call.request.query_string):
            return await self.quotas.usage_summed(call, "quota_set")
        return await self.master.forward(call)

    async def limits(self, call: Call) -> web.StreamResponse:
        if call.method == "GET" and len(call.segments) == 1:
            return await self.quotas.usage_summed(call, "limits")
        return await self.master.forward(call)


class UserQuotaJobs:
    """The write hook that gives every region a user's limits once the master took them."""

    def __init__(self, store: JobStore, background: BoundedPool) -> None:
        self.store = store
        self.background = background

    async def written(self, call: Call, region: str, reply: Reply) -> None:
        write = user_quota_write(call.segments, call.request.query_string, call.method, call.body)
        if write is not None:
            await self.background.run(self.store.enqueue, USER_QUOTA_SYNC, job_resource(write),
                                      project_id=write.project_id,
                                      payload={"master": region, "keys": list(write.keys), "deleted": write.deleted})
