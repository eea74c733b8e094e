"""Job handlers that spread the gateway's global objects from the master region to
every other region (``isthmus-xjob`` loads them through the ``isthmus.jobs.handlers``
entry point). Level-triggered and idempotent: each run reads the object in the
master and makes every region match, creating, replacing or deleting as needed.

Configuration (the worker's): ``[isthmus_service]`` keystoneauth options of a
service user with the admin role, ``[database] connection`` (the registry),
``[gateway_sync]`` (resync.py). The master region travels in each job's payload,
so worker and gateway agree; the periodic resync (resync.py) runs only where the
worker is told the master too.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1.session import Session
from oslo_config import cfg

from isthmus import callguard
from isthmus.clients.service import DEFAULT_TIMEOUT
from isthmus.gateway import resync
from isthmus.jobs import HandlerRegistry, JobContext, PermanentFailure, ResourceRef, Resync, RetryLater

if TYPE_CHECKING:
    from isthmus.registry import Registry

LOG = logging.getLogger(__name__)

# Job types: the gateway (globals.py) enqueues them, these handlers run them.
FLAVOR_SYNC = "gateway_flavor_sync"
KEYPAIR_SYNC = "gateway_keypair_sync"
QUOTA_SYNC = "gateway_quota_sync"
VOLUME_TYPE_SYNC = "gateway_volume_type_sync"
USER_QUOTA_SYNC = "gateway_user_quota_sync"  # one user's limits in a project (quota_sets.py)
AUTH_GROUP = "isthmus_service"
VOLUME_TYPES = ("block-storage", "volumev3", "volume")
FLAVOR_FIELDS = ("name", "ram", "vcpus", "disk", "OS-FLV-EXT-DATA:ephemeral", "swap", "rxtx_factor",
                 "os-flavor-access:is_public")


# A service that cannot be reached: retried later, never read as an answer.
_UNREACHABLE = (ks_exc.ConnectFailure, ks_exc.ConnectTimeout, ks_exc.RequestTimeout, ks_exc.DiscoveryFailure)


class NoEndpoint(RetryLater):
    """The region's catalogue has no endpoint of the service (yet: retried)."""


class RegionAccess(Protocol):
    """What the handlers use: the region names, the configured master and one call to a region's API."""

    def regions(self) -> list[str]: ...

    def master(self) -> str | None: ...

    def call(self, method: str, region: str, service: str, path: str, version: str | None = None,
             **kw: Any) -> Any: ...


class Regions:
    """Keystone session plus the registry's regional pods (built on first use)."""

    def __init__(self, conf: cfg.ConfigOpts | None) -> None:
        self.conf = conf
        self._lock = threading.Lock()
        self._session: Session | None = None
        self._registry: Registry | None = None
        self._regions_fn: Callable[[], Iterable[str]] | None = None  # fixed(): no registry

    @classmethod
    def fixed(cls, session: Session, regions: Callable[[], Iterable[str]]) -> Regions:
        """For the gateway's inline use: its own session and a region list callable."""
        obj = cls(None)
        obj._session = session
        obj._regions_fn = regions
        return obj

    def _build(self) -> None:
        if self._regions_fn is not None:
            return
        from isthmus.clients.regions import load_session
        from isthmus.db import make_engine
        from isthmus.registry import Registry

        if self.conf is None:
            raise PermanentFailure("gateway sync handlers need the worker configuration")
        with self._lock:
            if self._session is None:
                # Bounded by default (keystoneauth's own is none): a hung region
                # must cost a job one timeout, not a worker slot for ever.
                self._session = load_session(self.conf, AUTH_GROUP, default_timeout=DEFAULT_TIMEOUT)
                self._registry = Registry(make_engine(self.conf.database.connection))

    def session(self):
        self._build()
        return self._session

    def regions(self) -> list[str]:
        self._build()
        if self._regions_fn is not None:
            return list(self._regions_fn())
        assert self._registry is not None  # built above
        return [p.region_name for p in self._registry.regional_pods()]

    def master(self) -> str | None:
        """The configured master region (``[gateway_sync] master_region``), if any."""
        return self.conf.gateway_sync.master_region if self.conf is not None else None

    def identity(self, path: str) -> Any:
        """GET on Keystone's v3 API (the resync lists users and projects)."""
        callguard.check()
        try:
            return self.session().request(path, "GET", endpoint_filter={
                "service_type": "identity", "interface": "public", "version": (3, 0)}, raise_exc=False)
        except _UNREACHABLE as err:
            raise RetryLater(f"Keystone unreachable: {err}") from err

    def call(self, method: str, region: str, service: str, path: str, version: str | None = None, **kw):
        types = VOLUME_TYPES if service == "volume" else (service,)
        headers = kw.pop("headers", {})
        if version:
            headers["OpenStack-API-Version"] = f"{service} {version}"
        last = None
        for service_type in types:
            callguard.check()  # the job runner's: a job whose lease or deadline is gone stops here
            try:
                return self.session().request(
                    path, method, endpoint_filter={"service_type": service_type, "region_name": region,
                                                   "interface": "public"},
                    headers=headers, raise_exc=False, **kw)
            except ks_exc.EndpointNotFound as err:
                last = err
            except _UNREACHABLE as err:
                raise RetryLater(f"region {region} unreachable: {err}") from err
        raise NoEndpoint(f"region {region} has no {service} endpoint: {last}")


def _ok(resp, *accepted: int):
    if resp.status_code in accepted:
        return resp
    if resp.status_code >= 500:
        raise RetryLater(f"{resp.request.method} {resp.url}: {resp.status_code}")
    raise RuntimeError(f"{resp.request.method} {resp.url}: {resp.status_code} {resp.text[:200]}")


def _targets(regions: RegionAccess, ctx: JobContext) -> tuple[str, list[str]]:
    regions_now = regions.regions()
    master = ctx.payload.get("master") or regions.master() or regions_now[0]
    only = ctx.payload.get("only")
    return master, [r for r in regions_now if r != master and (not only or r == only)]


def _norm(value):
    """Nova shows "no swap" as "" or 0 depending on the microversion."""
    return 0 if value in ("", None) else value


def sync_flavor(regions: RegionAccess, ctx: JobContext) -> None:
    master, others = _targets(regions, ctx)
    fid = quote(ctx.resource_id, safe="")  # every path segment from user input is quoted
    got = _ok(regions.call("GET", master, "compute", f"/flavors/{fid}"), 200, 404)
    flavor = got.json()["flavor"] if got.status_code == 200 else None
    specs, access = {}, []
    if flavor:
        specs = _ok(regions.call("GET", master, "compute", f"/flavors/{fid}/os-extra_specs"), 200).json()["extra_specs"]
        if not flavor.get("os-flavor-access:is_public", True):
            access = [a["tenant_id"] for a in _ok(regions.call(
                "GET", master, "compute", f"/flavors/{fid}/os-flavor-access"), 200).json()["flavor_access"]]
    inline = bool(ctx.payload.get("inline"))  # before a user's create: only ever add what is missing
    if flavor is None and ctx.payload.get("resync"):
        return  # absent from a list is no proof of a delete (resync.py)
    for region in others:
        cur = _ok(regions.call("GET", region, "compute", f"/flavors/{fid}"), 200, 404)
        current = cur.json()["flavor"] if cur.status_code == 200 else None
        if inline and (flavor is None or current is not None):
            continue
        if flavor is None:
            if current:
                _ok(regions.call("DELETE", region, "compute", f"/flavors/{fid}"), 202, 404)
            continue
        if current and any(_norm(current.get(k)) != _norm(flavor.get(k)) for k in FLAVOR_FIELDS):
            _ok(regions.call("DELETE", region, "compute", f"/flavors/{fid}"), 202, 404)
            current = None
        if current is None:
            body = {k: flavor[k] for k in FLAVOR_FIELDS if k in flavor and flavor[k] not in ("", None)}
            body["id"] = ctx.resource_id
            _ok(regions.call("POST", region, "compute", "/flavors", json={"flavor": body}), 200, 409)
        have = _ok(regions.call("GET", region, "compute", f"/flavors/{fid}/os-extra_specs"), 200).json()["extra_specs"]
        if specs and have != specs:
            _ok(regions.call("POST", region, "compute", f"/flavors/{fid}/os-extra_specs",
                             json={"extra_specs": specs}), 200)
        for key in set(have) - set(specs):
            spec_path = f"/flavors/{fid}/os-extra_specs/{quote(key, safe='')}"
            _ok(regions.call("DELETE", region, "compute", spec_path), 200, 404)
        if not flavor.get("os-flavor-access:is_public", True):
            there = {a["tenant_id"] for a in _ok(regions.call(
                "GET", region, "compute", f"/flavors/{fid}/os-flavor-access"), 200).json()["flavor_access"]}
            for tenant in set(access) - there:
                _ok(regions.call("POST", region, "compute", f"/flavors/{fid}/action",
                                 json={"addTenantAccess": {"tenant": tenant}}), 200, 409)
            for tenant in there - set(access):
                _ok(regions.call("POST", region, "compute", f"/flavors/{fid}/action",
                                 json={"removeTenantAccess": {"tenant": tenant}}), 200, 404)


def sync_keypair(regions: RegionAccess, ctx: JobContext) -> None:
    master, others = _targets(regions, ctx)
    user, _, name = ctx.resource_id.partition("/")
    path = f"/os-keypairs/{quote(name, safe='')}?user_id={quote(user, safe='')}"
    got = _ok(regions.call("GET", master, "compute", path, version="2.10"), 200, 404)
    key = got.json()["keypair"] if got.status_code == 200 else None
    if key is None and ctx.payload.get("resync"):
        return  # absent from a list is no proof of a delete (resync.py)
    for region in others:
        cur = _ok(regions.call("GET", region, "compute", path, version="2.10"), 200, 404)
        current = cur.json()["keypair"] if cur.status_code == 200 else None
        if current and (key is None or current.get("public_key") != key.get("public_key")):
            _ok(regions.call("DELETE", region, "compute", path, version="2.10"), 202, 204, 404)
            current = None
        if key and current is None:
            body = {"name": name, "public_key": key["public_key"], "user_id": user, "type": key.get("type", "ssh")}
            _ok(regions.call("POST", region, "compute", "/os-keypairs", version="2.10",
                             json={"keypair": body}), 200, 201, 409)


def sync_quota(regions: RegionAccess, ctx: JobContext) -> None:
    """Each region gets the master's limits (the gateway checks the sum across regions)."""
    master, others = _targets(regions, ctx)
    service = ctx.payload.get("service", "compute")
    project = quote(ctx.resource_id.rsplit("/", 1)[-1], safe="")
    limits = _ok(regions.call("GET", master, service, f"/os-quota-sets/{project}"), 200).json()["quota_set"]
    limits = {k: v for k, v in limits.items() if k != "id" and isinstance(v, int)}
    for region in others:
        try:
            held = _ok(regions.call("GET", region, service, f"/os-quota-sets/{project}"), 200).json()["quota_set"]
        except NoEndpoint:
            if ctx.payload.get("resync"):
                continue  # a region without Cinder has no volume limits to keep
            raise
        changed = {k: v for k, v in limits.items() if held.get(k) != v}
        if changed:  # write only what differs: a resync of an unchanged project costs reads only
            _ok(regions.call("PUT", region, service, f"/os-quota-sets/{project}",
                             json={"quota_set": changed}), 200)


def sync_user_quota(regions: RegionAccess, ctx: JobContext) -> None:
    """Each region gets the user's limits (``?user_id=``) the master holds for the
    keys the write named, or none after a DELETE (back to the project's limits)."""
    master, others = _targets(regions, ctx)
    project, _, user = ctx.resource_id.partition("/")
    path = f"/os-quota-sets/{quote(project, safe='')}?user_id={quote(user, safe='')}"
    if ctx.payload.get("deleted"):
        for region in others:
            _ok(regions.call("DELETE", region, "compute", path), 202, 204, 404)
        return
    held = _ok(regions.call("GET", master, "compute", path), 200).json()["quota_set"]
    wanted = {k: held[k] for k in ctx.payload.get("keys") or () if isinstance(held.get(k), int)}
    if not wanted:
        return
    for region in others:
        _ok(regions.call("PUT", region, "compute", path, json={"quota_set": wanted}), 200)


def _master_volume_type(regions: RegionAccess, master: str, wanted: str) -> dict | None:
    """The master's volume type ``wanted``, by id or by name (a create names
    it either way; Cinder's GET by id does not take a name)."""
    got = _ok(regions.call("GET", master, "volume", f"/types/{quote(wanted, safe='')}"), 200, 404)
    if got.status_code == 200:
        return got.json()["volume_type"]
    listed = _ok(regions.call("GET", master, "volume", "/types?is_public=None"), 200).json()["volume_types"]
    return next((t for t in listed if t["name"] == wanted), None)


def sync_volume_type(regions: RegionAccess, ctx: JobContext) -> None:
    master, others = _targets(regions, ctx)
    vtype = _master_volume_type(regions, master, ctx.resource_id)
    if vtype is None and (ctx.payload.get("inline") or ctx.payload.get("resync")):
        return  # an inline check or a resync never deletes: the master simply has no such type
    name = vtype["name"] if vtype else ctx.payload.get("name")
    if not name:
        raise PermanentFailure("volume type gone from the master and no name in the payload")
    for region in others:
        listed = _ok(regions.call("GET", region, "volume", "/types?is_public=None"), 200).json()["volume_types"]
        current = next((t for t in listed if t["name"] == name), None)
        if vtype is None:
            if current:
                _ok(regions.call("DELETE", region, "volume", f"/types/{quote(current['id'], safe='')}"), 202, 404)
            continue
        if current is not None and ctx.payload.get("inline"):
            continue  # a user's create only ever adds a missing type, never rewrites a region's
        if current is None:
            body = {"name": name, "description": vtype.get("description"),
                    "os-volume-type-access:is_public": vtype.get("is_public", True),
                    "extra_specs": vtype.get("extra_specs") or {}}
            _ok(regions.call("POST", region, "volume", "/types", json={"volume_type": body}), 200, 409)
        elif (vtype.get("extra_specs") or {}) != (current.get("extra_specs") or {}):
            _ok(regions.call("POST", region, "volume", f"/types/{quote(current['id'], safe='')}/extra_specs",
                             json={"extra_specs": vtype.get("extra_specs") or {}}), 200)


def register_handlers(registry: HandlerRegistry, conf: cfg.ConfigOpts | None = None) -> None:
    if conf is not None:
        from isthmus.clients.regions import register_auth_opts
        register_auth_opts(conf, AUTH_GROUP)
    regions = Regions(conf)
    handlers: tuple[tuple[str, Callable[[RegionAccess, JobContext], None]], ...] = (
        (FLAVOR_SYNC, sync_flavor), (KEYPAIR_SYNC, sync_keypair), (QUOTA_SYNC, sync_quota),
        (VOLUME_TYPE_SYNC, sync_volume_type), (USER_QUOTA_SYNC, sync_user_quota))
    resyncs = _resyncs(regions, conf)
    for job_type, handler in handlers:
        registry.register(job_type, functools.partial(handler, regions), resync=resyncs.get(job_type))


def _resyncs(regions: Regions, conf: cfg.ConfigOpts | None) -> dict[str, Resync]:
    """The periodic resyncs (resync.py), where the worker knows the master region."""
    if conf is None:
        return {}
    resync.register_opts(conf)
    interval = conf.gateway_sync.resync_interval
    master = conf.gateway_sync.master_region
    if not master or interval <= 0:
        return {}

    def compute(path: str, version: str | None = None) -> Any:
        return regions.call("GET", master, "compute", path, version=version)

    def volume(path: str, version: str | None = None) -> Any:
        return regions.call("GET", master, "volume", path, version=version)

    def quota_refs() -> Iterable[ResourceRef]:
        services: tuple[str, ...] = ("compute", "volume")
        try:
            volume("/types?limit=1")
        except NoEndpoint:
            services = ("compute",)  # no Cinder at the master: no volume limits to spread
        return resync.quotas(regions.identity, master, services)

    def volume_type_refs() -> Iterable[ResourceRef]:
        try:
            return list(resync.volume_types(volume, master))
        except NoEndpoint:
            return []  # no Cinder at the master: no volume types to spread

    listers: dict[str, Callable[[], Iterable[ResourceRef]]] = {
        FLAVOR_SYNC: lambda: resync.flavors(compute, master),
        VOLUME_TYPE_SYNC: volume_type_refs,
        KEYPAIR_SYNC: lambda: resync.keypairs(compute, regions.identity, master),
        QUOTA_SYNC: quota_refs,
    }
    return {job_type: Resync(interval, lister) for job_type, lister in listers.items()}
