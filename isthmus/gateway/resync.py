"""Periodic resync of the gateway's global objects (the backstop of the write hooks).

The gateway enqueues a sync job on every write it forwards to the master region; a
job that ran while a region was down converges when retried, but an object written
at the master *around* the gateway (an admin on the region's own endpoint, a job
that ran out of attempts) would stay different for ever. The resync lists what the
master holds, on a timer, and enqueues one job per object; coalescing makes that
free where a job is already pending.

Resync jobs never delete: an object missing from the master's list is no proof of a
delete (docs/gateway.md, "Global objects"); deletes travel only as the gateway's own
write events. They run only where ``[gateway_sync] master_region`` is set, because a
worker that guessed the master wrong would copy one region's objects over the
others'.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from oslo_config import cfg

from isthmus.jobs import ResourceRef

LOG = logging.getLogger(__name__)

GROUP = "gateway_sync"
OPTS = [
    cfg.StrOpt("master_region",
               help="Region that holds the global objects: the gateway's [gateway] master_region. "
                    "Unset: sync jobs use the master their payload names (or the first region) and "
                    "no periodic resync runs."),
    cfg.FloatOpt("resync_interval", default=3600.0, min=0.0,
                 help="Seconds between periodic resyncs of flavors, volume types, keypairs and quotas "
                      "from the master region (0: off)."),
]
PAGE = 1000

Call = Callable[..., Any]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """For oslo-config-generator (namespace isthmus-xjob-gateway): the gateway's
    sync jobs, which isthmus-xjob runs."""
    return [(GROUP, OPTS)]


def _json(resp: Any, what: str) -> dict:
    if resp.status_code != 200:
        raise RuntimeError(f"resync: listing {what} answered {resp.status_code}")
    return resp.json()


def _paged(call: Call, path: str, key: str, version: str | None = None,
           marker_of: Callable[[dict], str] = lambda item: item["id"]) -> Iterator[dict]:
    """Every item of a Nova/Cinder list, page by page (``limit`` + ``marker``)."""
    marker = None
    sep = "&" if "?" in path else "?"
    while True:
        page_path = f"{path}{sep}limit={PAGE}" + (f"&marker={marker}" if marker else "")
        items = _json(call(page_path, version), path)[key]
        yield from items
        if len(items) < PAGE:
            return
        marker = marker_of(items[-1])


def _keypair(item: dict) -> dict:
    """Nova lists keypairs as ``{"keypair": {...}}``; their marker is the name."""
    return item.get("keypair") or item


def flavors(call: Call, master: str) -> Iterator[ResourceRef]:
    for flavor in _paged(call, "/flavors?is_public=None", "flavors"):
        yield ResourceRef(flavor["id"], None, {"master": master, "resync": True})


def volume_types(call: Call, master: str) -> Iterator[ResourceRef]:
    for vtype in _paged(call, "/types?is_public=None", "volume_types"):
        yield ResourceRef(vtype["id"], None, {"name": vtype["name"], "master": master, "resync": True})


def keypairs(call: Call, identity: Call, master: str) -> Iterator[ResourceRef]:
    """Nova lists one user's keypairs at a time: every Keystone user's, at the master."""
    for user in _keystone(identity, "/users", "users"):
        for item in _paged(call, f"/os-keypairs?user_id={user['id']}", "keypairs", version="2.35",
                           marker_of=lambda item: _keypair(item)["name"]):
            name = _keypair(item)["name"]
            yield ResourceRef(f"{user['id']}/{name}", None, {"master": master, "resync": True})


def quotas(identity: Call, master: str, services: tuple[str, ...] = ("compute",)) -> Iterator[ResourceRef]:
    """Every project's limits of each service (a region must hold the master's)."""
    for project in _keystone(identity, "/projects", "projects"):
        pid = project["id"]
        if "compute" in services:
            yield ResourceRef(pid, pid, {"master": master, "resync": True})
        if "volume" in services:
            yield ResourceRef(f"volume/{pid}", pid, {"master": master, "service": "volume", "resync": True})


def _keystone(identity: Call, path: str, key: str) -> Iterator[dict]:
    doc = _json(identity(path), path)
    if doc.get("truncated"):
        # Keystone's [DEFAULT] list_limit cut the list and it has no marker paging.
        LOG.warning("resync: Keystone truncated %s; objects of the rest are not resynced", path)
    yield from doc[key]
