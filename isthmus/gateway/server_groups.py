"""Server groups over every region (``os-server-groups`` and the ``group`` hint).

A group is created at the master region through the gateway: its id there is the
id users see. Nova cannot create a group with a given id, so the first boot with
``group=<id>`` into another region creates a regional copy there (same name,
policy and rules, with the caller's own token: it belongs to the caller's project)
and records it in the routing table (kind ``server_group``, top = the master's id,
bottom = the copy's id, one per region by the table's unique key); the hint is
rewritten to the copy's id for that region. Each region's Nova enforces the
policy among the group's members in that region. Anti-affinity then holds
everywhere (two regions never share a host); a hard ``affinity`` group keeps all
its members in one region, so a boot elsewhere is a 409.

Show and list read the master's group and add the members of its copies; delete
removes the copies first (a copy in a region that is down makes it a 503, nothing
deleted at the master), then the group at the master. Every call uses the caller's
token: the gateway never acts on a group the caller could not act on itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from isthmus.gateway.apis import COMPUTE, Routed
from isthmus.gateway.call import Settings
from isthmus.gateway.core import MasterRegion
from isthmus.gateway.faults import Fault
from isthmus.gateway.forwarding import Forwarder
from isthmus.gateway.proxy import Reply
from isthmus.gateway.routing import Router
from isthmus.gateway.versions import Versions

LOG = logging.getLogger(__name__)

KIND = "server_group"
HINT_KEYS = ("os:scheduler_hints", "OS-SCH-HNT:scheduler_hints")
POLICY_VERSION = (2, 64)  # "policy" and "rules" instead of the "policies" list
SERVER_GROUPS_VERSION = (2, 71)  # a server shows the groups it is in
_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")


@dataclass(frozen=True)
class GroupHint:
    hints_key: str  # which of HINT_KEYS the body used
    group_id: str


@dataclass(frozen=True)
class GroupSpec:
    """What a regional copy is made from (the master's group)."""

    name: str
    policy: str
    rules: dict[str, Any]
    project_id: str | None
    members: tuple[str, ...]


def group_hint(doc: dict) -> GroupHint | None:
    """The ``group`` scheduler hint of a server create body, validated (400 naming the field)."""
    for key in HINT_KEYS:
        if key not in doc:
            continue
        hints = doc[key]
        if not isinstance(hints, dict):
            raise Fault(400, f"Invalid input for field/attribute {key}: must be an object.")
        if "group" not in hints:
            return None
        group = hints["group"]
        if not isinstance(group, str) or not _UUID.match(group):
            raise Fault(400, f"Invalid input for field/attribute {key}.group: {group!r} is not a server group id.")
        return GroupHint(key, group)
    return None


def group_spec(doc: Any) -> GroupSpec:
    """A group as Nova shows it, at 2.64+ (``policy``, ``rules``) or before (``policies``)."""
    group = (doc or {}).get("server_group") or {}
    policy = group.get("policy") or next(iter(group.get("policies") or []), "")
    return GroupSpec(name=str(group.get("name") or ""), policy=str(policy), rules=dict(group.get("rules") or {}),
                     project_id=group.get("project_id"), members=tuple(group.get("members") or ()))


def copy_body(spec: GroupSpec, with_policy_field: bool) -> dict:
    """The create body of a regional copy."""
    if with_policy_field:
        body: dict[str, Any] = {"name": spec.name, "policy": spec.policy}
        if spec.rules:
            body["rules"] = spec.rules
        return {"server_group": body}
    return {"server_group": {"name": spec.name, "policies": [spec.policy]}}


def merge_members(group: dict, extra: list[str]) -> None:
    """Add the members of the copies (server ids are global) to a group as shown."""
    members = group.setdefault("members", [])
    for server_id in extra:
        if server_id not in members:
            members.append(server_id)


def affinity_conflict(policy: str, target: str, members_by_region: dict[str, tuple[str, ...]]) -> str | None:
    """The region a hard-affinity group already lives in, if the boot targets another."""
    if policy != "affinity":
        return None
    for region, members in sorted(members_by_region.items()):
        if members and region != target:
            return region
    return None


class ServerGroups:
    def __init__(self, settings: Settings, router: Router, fwd: Forwarder, versions: Versions,
                 master: MasterRegion) -> None:
        self.settings = settings
        self.router = router
        self.fwd = fwd
        self.versions = versions
        self.master = master  # creates (and Nova's 404/405s) are the master's
        self._making: dict[tuple[str, str], asyncio.Lock] = {}
        self._tops: dict[str, str] = {}  # copy id -> gateway id (a copy's id never changes)

    # --- a server's own view (2.71+: "server_groups") --------------------------------------
    async def server_groups_of_server(self, call, spec: Routed, reply: Reply) -> Reply:
        """A server shows the gateway's group id, not its region's copy."""
        if (spec.kind != "server" or call.version < SERVER_GROUPS_VERSION or not 200 <= reply.status < 300
                or not reply.is_json or b'"server_groups"' not in reply.body):
            return reply
        doc = reply.json()
        server = doc.get("server") if isinstance(doc, dict) else None
        if not isinstance(server, dict):
            return reply
        shown = server.get("server_groups")
        if not isinstance(shown, list) or not shown:
            return reply
        server["server_groups"] = [await self._top_of(g) if isinstance(g, str) else g for g in shown]
        return dataclasses.replace(reply, body=json.dumps(doc).encode())

    async def _top_of(self, group_id: str) -> str:
        if group_id not in self._tops:
            top = await self.router.top_of(KIND, group_id)
            if top is None:
                return group_id  # the master's own group (or one made in the region)
            self._tops[group_id] = top
        return self._tops[group_id]

    # --- os-server-groups ------------------------------------------------------------
    async def handle(self, call) -> web.StreamResponse:
        segs, method = call.segments, call.method
        if len(segs) == 1 and method == "GET":
            return await self._list(call)
        if len(segs) == 2 and method == "GET":
            return await self._show(call, segs[1])
        if len(segs) == 2 and method == "DELETE":
            return await self._delete(call, segs[1])
        return await self.master.forward(call)  # create (and Nova's 404/405s)

    async def _show(self, call, group_id: str) -> web.StreamResponse:
        master = await self.router.master_region()
        reply = await self.fwd.forward(call, master, "GET", call.rel, body=b"")
        if reply.status != 200:
            return self.fwd.render(call, reply, master)
        doc = reply.json()
        merge_members(doc["server_group"], await self._copy_members(call, group_id))
        return self._json(call, doc)

    async def _list(self, call) -> web.StreamResponse:
        master = await self.router.master_region()
        reply = await self.fwd.forward(call, master, "GET", call.rel, body=b"")
        if reply.status != 200:
            return self.fwd.render(call, reply, master)
        doc = reply.json()
        groups = [g for g in doc.get("server_groups") or [] if isinstance(g, dict) and g.get("id")]
        extras = await asyncio.gather(*(self._copy_members(call, g["id"]) for g in groups))
        for group, extra in zip(groups, extras, strict=True):
            merge_members(group, extra)
        return self._json(call, doc)

    async def _delete(self, call, group_id: str) -> web.StreamResponse:
        master = await self.router.master_region()
        # The caller must be able to see the group at the master before its copies go.
        seen = await self.fwd.forward(call, master, "GET", call.rel_for("os-server-groups", group_id),
                                              body=b"", query="")
        if seen.status != 200:
            return self.fwd.render(call, seen, master)
        for region, copy_id in (await self.router.copies(KIND, group_id)).items():
            reply = await self.fwd.forward(call, region, "DELETE", call.rel_for("os-server-groups", copy_id),
                                                   body=b"", query="")
            if reply.status not in (204, 404):
                return self.fwd.render(call, reply, region)
            await self.router.forget_copy(KIND, group_id, region)
        reply = await self.fwd.forward(call, master, "DELETE", call.rel, body=b"")
        return self.fwd.render(call, reply, master)

    async def _copy_members(self, call, group_id: str) -> list[str]:
        """Members of the group's regional copies (a region that is down is skipped)."""
        members: list[str] = []
        for found in (await self._members_by_region(call, group_id)).values():
            members += found
        return members

    async def _members_by_region(self, call, group_id: str) -> dict[str, tuple[str, ...]]:
        copies = await self.router.copies(KIND, group_id)

        async def one(region: str, copy_id: str) -> tuple[str, ...]:
            try:
                reply = await self.fwd.forward(call, region, "GET", call.rel_for("os-server-groups", copy_id),
                                                       body=b"", query="", timeout=self.settings.list_timeout)
            except Fault as err:
                LOG.warning("%s: members of group %s in %s unknown: %s", call.request_id, group_id, region,
                            err.message)
                return ()
            return group_spec(reply.json()).members if reply.status == 200 else ()

        found = await asyncio.gather(*(one(r, c) for r, c in copies.items()))
        return dict(zip(copies, found, strict=True))

    def _json(self, call, doc: dict) -> web.Response:
        text = self.fwd.rewriter(call).text(json.dumps(doc))
        return web.Response(status=200, body=text.encode(), content_type="application/json")

    # --- the group hint of a server create ------------------------------------------------
    async def rewrite_hint(self, call, spec: Routed, region: str, body: bytes) -> bytes:
        """Point the ``group`` hint at the target region's copy (made on first use)."""
        if spec.kind != "server":
            return body
        doc = json.loads(body)  # parsed once already by the create: valid JSON
        hint = group_hint(doc)
        if hint is None:
            return body
        copy_id = await self._regional_group(call, region, hint)
        if copy_id is None:
            return body
        doc[hint.hints_key]["group"] = copy_id
        return json.dumps(doc).encode()

    async def _regional_group(self, call, region: str, hint: GroupHint) -> str | None:
        """The id the hint must name in ``region`` (None: leave it as it is)."""
        master = await self.router.master_region()
        policy_call = await self._policy_call(call)
        # A master that is down is a 503 here (creates read the flavor there too).
        reply = await self.fwd.forward(policy_call, master, "GET",
                                               call.rel_for("os-server-groups", hint.group_id), body=b"", query="",
                                               timeout=self.settings.list_timeout)
        if reply.status != 200:
            return None  # not a gateway group the caller can see: the region's Nova answers
        group = group_spec(reply.json())
        if group.policy == "affinity":
            by_region = {master: group.members, **await self._members_by_region(call, hint.group_id)}
            elsewhere = affinity_conflict(group.policy, region, by_region)
            if elsewhere:
                raise Fault(409, f"Server group {hint.group_id} has the affinity policy and its members are in "
                                 f"region {elsewhere}; boot in that region's availability zone.")
        if region == master:
            return None
        if group.project_id and group.project_id != call.identity.project_id:
            # The copy would belong to the caller's project, where the group's own
            # members could not use it.
            raise Fault(409, f"Server group {hint.group_id} belongs to another project; only that project's "
                             f"users can boot into it outside region {master}.")
        return await self._copy_in(policy_call, hint.group_id, group, region)

    async def _policy_call(self, call):
        """The call at 2.64 (policy, rules, project_id) if every region supports it."""
        supported = await self.versions.supported(COMPUTE)
        if call.version < POLICY_VERSION and POLICY_VERSION in supported:
            return dataclasses.replace(call, version=POLICY_VERSION)
        return call

    async def _copy_in(self, call, group_id: str, group: GroupSpec, region: str) -> str:
        """The id of the group's copy in ``region``, created there on first use."""
        lock = self._making.setdefault((group_id, region), asyncio.Lock())
        async with lock:
            known = (await self.router.copies(KIND, group_id)).get(region)
            if known:
                reply = await self.fwd.forward(call, region, "GET", call.rel_for("os-server-groups", known),
                                                       body=b"", query="")
                if reply.status == 200:
                    return known
                if reply.status != 404:
                    raise Fault(503, f"The copy of server group {group_id} in region {region} cannot be read "
                                     f"({reply.status}).")
                LOG.info("%s: copy %s of group %s is gone from %s; making another", call.request_id, known,
                         group_id, region)
                await self.router.forget_copy(KIND, group_id, region)
            body = copy_body(group, call.version >= POLICY_VERSION)
            made = await self.fwd.forward(call, region, "POST", call.rel_for("os-server-groups"),
                                                  body=json.dumps(body).encode(), query="")
            if made.status != 200:  # e.g. the region's server_groups quota (403)
                raise Fault(made.status if 400 <= made.status < 500 else 503,
                            f"Server group {group_id} could not be copied to region {region}: "
                            f"{fault_message(made)}")
            copy_id = made.json()["server_group"]["id"]
            try:
                winner = await self.router.record_copy(KIND, group_id, copy_id, region,
                                                               call.identity.project_id)
            except Exception:
                await self._drop(call, region, copy_id)
                raise
            if winner != copy_id:  # another gateway process made one first: use it
                await self._drop(call, region, copy_id)
            return winner

    async def _drop(self, call, region: str, copy_id: str) -> None:
        try:
            await self.fwd.forward(call, region, "DELETE", call.rel_for("os-server-groups", copy_id),
                                           body=b"", query="")
        except Fault:
            LOG.error("%s: unrecorded copy %s in %s could not be deleted", call.request_id, copy_id, region)


def fault_message(reply) -> str:
    """The message of a Nova fault body (``{"forbidden": {"message": ...}}``)."""
    try:
        doc = reply.json()
        return str(next(iter(doc.values()))["message"])
    except (ValueError, TypeError, KeyError, StopIteration, AttributeError):
        return f"status {reply.status}"
