"""Where each region's Nova/Cinder is, and which microversions it speaks.

Endpoints come from the gateway's own service token catalog (no admin needed, no
user token), by Keystone region id and service *type* (with aliases), cached for
``catalog_ttl`` and refreshed early after a connection error, so a renamed
service or a moved endpoint is picked up without a restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from isthmus.gateway import links
from isthmus.gateway.microversion import Range, parse

LOG = logging.getLogger(__name__)

SERVICE_TYPES = {
    "compute": ("compute",),
    "volume": ("block-storage", "volumev3", "volume"),
    "image": ("image",),
}
VERSION_IDS = {"compute": "v2.1", "volume": "v3.0"}


@dataclass(frozen=True)
class Endpoint:
    region: str
    url: str  # catalog URL without the project template, no trailing slash

    @property
    def root(self) -> str:
        return links.service_root(self.url)


def endpoints_from_catalog(catalog: Mapping[str, Sequence[Mapping]], kind: str, interface: str,
                           project_id: str | None, exclude: set[str]) -> dict[str, Endpoint]:
    """``catalog``: service type -> endpoint dicts (keystoneauth ``get_endpoints``)."""
    found: dict[str, Endpoint] = {}
    for service_type in SERVICE_TYPES[kind]:  # first alias wins per region
        for ep in catalog.get(service_type, ()):
            region = ep.get("region_id") or ep.get("region")
            if not region or region in exclude or region in found or ep.get("interface") != interface:
                continue
            url = links.strip_project(ep["url"])
            if project_id and url.endswith("/" + project_id):
                url = url[: -len(project_id) - 1]  # the catalog substituted the service project
            found[region] = Endpoint(region, url.rstrip("/"))
    return found


class Catalog:
    def __init__(self, load_catalog: Callable[[bool], tuple[Mapping[str, Sequence[Mapping]], str | None]],
                 interface: str, exclude: set[str], ttl: float) -> None:
        """``load_catalog(refresh)`` returns (catalog, project id of the token); runs in a thread."""
        self._load = load_catalog
        self._interface = interface
        self._exclude = exclude
        self._ttl = ttl
        self._loaded_at = float("-inf")  # never (monotonic time may start near 0 after boot)
        self._endpoints: dict[str, dict[str, Endpoint]] = {}
        self._lock = asyncio.Lock()

    async def endpoints(self, kind: str) -> dict[str, Endpoint]:
        if time.monotonic() - self._loaded_at > self._ttl:
            await self.refresh()
        return self._endpoints.get(kind, {})

    async def endpoint(self, kind: str, region: str) -> Endpoint | None:
        return (await self.endpoints(kind)).get(region)

    async def refresh(self, force: bool = False) -> None:
        async with self._lock:
            if not force and time.monotonic() - self._loaded_at <= self._ttl:
                return
            try:
                # Always a fresh token's catalog: keystoneauth keeps answering from
                # the cached token's, so without it a moved endpoint would only be
                # seen when the token expires, not within the TTL.
                catalog, project_id = await asyncio.to_thread(self._load, True)
            except Exception as err:  # noqa: BLE001 - keep the last known endpoints
                LOG.warning("refreshing the service catalog failed: %s", err)
                self._loaded_at = time.monotonic() - self._ttl + 5  # retry in 5 s
                return
            self._endpoints = {kind: endpoints_from_catalog(catalog, kind, self._interface, project_id,
                                                            self._exclude) for kind in SERVICE_TYPES}
            self._loaded_at = time.monotonic()

    def invalidate(self, min_age: float = 10.0) -> None:
        """After a connection error: the next lookup reloads (the endpoint may have moved).

        At most once per ``min_age`` seconds: a region that stays down must not turn
        every request into a Keystone round trip."""
        if time.monotonic() - self._loaded_at >= min_age:
            self._loaded_at = float("-inf")

    def endpoints_known(self, kind: str) -> list[Endpoint]:
        """What the last load found for ``kind`` (no I/O: for rewriting replies)."""
        return list(self._endpoints.get(kind, {}).values())

    def all_roots(self) -> list[str]:
        return [ep.root for eps in self._endpoints.values() for ep in eps.values()]

    def all_hosts(self) -> list[str]:
        from urllib.parse import urlsplit
        return [urlsplit(ep.url).netloc for eps in self._endpoints.values() for ep in eps.values()]


def keystone_loader(session) -> Callable[[bool], tuple[dict, str | None]]:
    """Catalog of the gateway's service token (keystoneauth session)."""
    def load(refresh: bool) -> tuple[dict, str | None]:
        if refresh:
            session.invalidate()
        access = session.auth.get_access(session)
        return access.service_catalog.get_endpoints(), access.project_id
    return load


def version_entry(doc: Mapping, kind: str) -> Mapping | None:
    """The entry of the version the gateway serves, from a versions document (``GET /``
    of a region's service root)."""
    entries = doc.get("versions") or ([doc["version"]] if "version" in doc else [])
    if isinstance(entries, dict):  # some services wrap as {"versions": {"values": [...]}}
        entries = entries.get("values", [])
    for entry in entries:
        if entry.get("id") == VERSION_IDS[kind] and entry.get("version"):
            return entry
    return None


def version_range(doc: Mapping, kind: str) -> Range | None:
    entry = version_entry(doc, kind)
    if entry is None:
        return None
    return Range(parse(entry.get("min_version") or entry["version"]), parse(entry["version"]))
