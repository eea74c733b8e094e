"""Collect a :class:`~isthmus.topology.model.Snapshot` through the public REST APIs.

Reads, with the user's own credentials (a clouds.yaml cloud through
openstacksdk, as ``kubectl proxy`` uses the user's kubeconfig): central
Neutron (networks, ports, routers), each region's Neutron and Nova, found in
the catalogue by region name, and the Isthmus Admin API (service type
``multiregion``: pods, jobs). Every request is bounded by ``timeout`` and the
APIs are read side by side, so one hung region costs one timeout, never the
whole picture: a region whose API fails is marked unhealthy with the error,
and the rest of the model is built all the same.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from isthmus.topology.model import RegionSnapshot, Snapshot, Topology, build

LOG = logging.getLogger(__name__)

CENTRAL_REGION = "CentralRegion"
DEFAULT_TIMEOUT = 5.0
MAX_PAGES = 1000
ADMIN_SERVICE = "multiregion"
ADMIN_VERSION = "/v1.0"
JOB_STATES_READ = ("new", "running", "fail")


class ApiFailure(Exception):
    """One API could not be read: unreachable, timed out or an error answer."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Reader:
    """GETs JSON from one service of one region over a keystoneauth session."""

    session: Any
    service_type: str
    region: str | None
    interface: str
    timeout: float

    def get(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        from keystoneauth1 import exceptions as ks_exc

        absolute = path.startswith("http")
        kwargs: dict[str, Any] = {"raise_exc": False, "timeout": self.timeout, "connect_retries": 0,
                                  "headers": {"Accept": "application/json"}, "params": params or None}
        if not absolute:
            kwargs["endpoint_filter"] = {"service_type": self.service_type, "region_name": self.region,
                                         "interface": self.interface}
        try:
            resp = self.session.get(path, **kwargs)
        except ks_exc.ClientException as err:  # refused, timed out, no endpoint in the catalogue
            raise ApiFailure(f"{self.service_type}: {type(err).__name__}: {err}") from err
        if resp.status_code >= 400:
            raise ApiFailure(f"{self.service_type}: HTTP {resp.status_code}: {resp.text.strip()[:200]}",
                             resp.status_code)
        try:
            return resp.json()
        except ValueError as err:
            raise ApiFailure(f"{self.service_type}: answer is not JSON") from err

    def list(self, path: str, key: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Every page of an OpenStack list (``<key>_links`` rel ``next``)."""
        items: list[dict[str, Any]] = []
        data = self.get(path, params)
        for _ in range(MAX_PAGES):
            items += data.get(key) or []
            nxt = next((link["href"] for link in data.get(f"{key}_links") or [] if link.get("rel") == "next"), None)
            if not nxt:
                return items
            data = self.get(nxt)
        raise ApiFailure(f"{self.service_type}: {key} list longer than {MAX_PAGES} pages")


def read_neutron(reader: Reader, snapshot: RegionSnapshot, with_routers: bool = True) -> None:
    """Networks, ports and routers of one Neutron into ``snapshot``; on failure
    the error, and the lists left ``None`` (unknown, not empty)."""
    try:
        networks = reader.list("/v2.0/networks", "networks")
        ports = reader.list("/v2.0/ports", "ports")
        routers = _routers(reader) if with_routers else []
    except ApiFailure as err:
        snapshot.errors["network"] = str(err)
        return
    snapshot.networks, snapshot.ports, snapshot.routers = networks, ports, routers


def read_backend(reader: Reader, snapshot: RegionSnapshot) -> None:
    """The region's L2 backend from its agents (admin only: a refusal leaves it unknown)."""
    try:
        agents = reader.list("/v2.0/agents", "agents")
    except ApiFailure:
        return
    types = {a.get("agent_type") or "" for a in agents}
    if any(t.startswith("OVN ") for t in types):
        snapshot.backend = "ovn"
    elif "Open vSwitch agent" in types:
        snapshot.backend = "ovs"


def _routers(reader: Reader) -> list[dict[str, Any]]:
    try:
        return reader.list("/v2.0/routers", "routers")
    except ApiFailure as err:
        if err.status == 404:  # no L3 plugin in this Neutron: no routers, not a failure
            return []
        raise


def read_nova(reader: Reader, snapshot: RegionSnapshot) -> None:
    """Server names (the page labels ports with them). A Nova that fails makes the
    region unhealthy too: it is half of what a user reaches there."""
    try:
        try:
            snapshot.servers = reader.list("/servers/detail", "servers", {"all_tenants": "True"})
        except ApiFailure as err:
            if err.status != 403:  # not allowed to see every project's: one's own then
                raise
            snapshot.servers = reader.list("/servers/detail", "servers")
    except ApiFailure as err:
        snapshot.errors["compute"] = str(err)


@dataclass
class AdminView:
    pods: list[dict[str, Any]] | None = None
    jobs: list[dict[str, Any]] | None = None
    error: str | None = None
    reachable: bool = True


def admin_base(reader: Reader) -> str:
    """The Admin API's versioned URL; the catalogue may name it with or without the version."""
    from keystoneauth1 import exceptions as ks_exc

    try:
        url = reader.session.get_endpoint(service_type=reader.service_type, region_name=reader.region,
                                          interface=reader.interface)
    except ks_exc.ClientException as err:
        raise ApiFailure(f"{reader.service_type}: {type(err).__name__}: {err}") from err
    if not url:
        raise ApiFailure(f"{reader.service_type}: no endpoint in {reader.region} in the catalogue")
    base = str(url).rstrip("/")
    return base if base.endswith(ADMIN_VERSION) else base + ADMIN_VERSION


def read_admin(reader: Reader, job_limit: int = 500) -> AdminView:
    """Pods and the jobs not done yet or failed (at most ``job_limit`` of each state)."""
    try:
        base = admin_base(reader)
        pods = reader.list(base + "/pods", "pods")
    except ApiFailure as err:
        # 4xx: the API answered (e.g. the user has no admin role); not a health problem.
        return AdminView(error=str(err), reachable=err.status is not None and err.status < 500)
    jobs: list[dict[str, Any]] = []
    try:
        for state in JOB_STATES_READ:
            jobs += reader.get(base + "/jobs/detail", {"status": state, "limit": job_limit}).get("jobs") or []
    except ApiFailure as err:
        return AdminView(pods=pods, error=str(err), reachable=err.status is not None and err.status < 500)
    return AdminView(pods=pods, jobs=jobs)


def regions_of(pods: Sequence[dict[str, Any]] | None, catalog_regions: Sequence[str], central: str) -> list[str]:
    """The regions to show: the registered pods (the Admin API's truth), else every
    region with a network endpoint in the catalogue; the central one apart."""
    names = [p["region_name"] for p in pods or [] if p.get("az_name")] if pods else list(catalog_regions)
    return sorted({n for n in names if n and n != central})


@dataclass
class Collector:
    """Reads a whole snapshot; ``session`` is a keystoneauth session (openstacksdk's)."""

    session: Any
    central_region: str = CENTRAL_REGION
    interface: str = "public"
    timeout: float = DEFAULT_TIMEOUT
    now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)

    def reader(self, service_type: str, region: str | None) -> Reader:
        return Reader(self.session, service_type, region, self.interface, self.timeout)

    def catalog_regions(self) -> list[str]:
        try:
            catalog = self.session.auth.get_access(self.session).service_catalog
            return sorted({e.get("region_id") or e.get("region") for s in catalog.catalog
                           if s.get("type") == "network" for e in s.get("endpoints", [])} - {None})
        except Exception as err:  # noqa: BLE001 - no catalogue: no fallback regions, the error shows elsewhere
            LOG.debug("no catalogue: %s", err)
            return []

    def snapshot(self) -> Snapshot:
        central = RegionSnapshot(self.central_region)
        with ThreadPoolExecutor(max_workers=4) as pool:
            admin_f = pool.submit(read_admin, self.reader(ADMIN_SERVICE, self.central_region))
            central_f = pool.submit(read_neutron, self.reader("network", self.central_region), central)
            admin = admin_f.result()
            names = regions_of(admin.pods, self.catalog_regions() if admin.pods is None else [], self.central_region)
            regions = [RegionSnapshot(name) for name in names]
            futures = [pool.submit(read_neutron, self.reader("network", r.name), r) for r in regions]
            futures += [pool.submit(read_nova, self.reader("compute", r.name), r) for r in regions]
            futures += [pool.submit(read_backend, self.reader("network", r.name), r) for r in regions]
            for future in [central_f, *futures]:
                future.result()
        return Snapshot(central=central, regions=regions, pods=admin.pods, jobs=admin.jobs,
                        admin_error=admin.error, admin_reachable=admin.reachable,
                        collected_at=self.now().isoformat(timespec="seconds"))

    def topology(self) -> Topology:
        return build(self.snapshot())


def connect(cloud: str | None, timeout: float = DEFAULT_TIMEOUT) -> Any:
    """An openstacksdk connection for a clouds.yaml cloud (``OS_CLIENT_CONFIG_FILE``,
    ``OS_CLOUD`` and the usual search path apply); its session is what we read with."""
    import openstack

    return openstack.connect(cloud=cloud, api_timeout=timeout)


def collector_for(cloud: str | None, central_region: str = CENTRAL_REGION,
                  timeout: float = DEFAULT_TIMEOUT) -> Collector:
    conn = connect(cloud, timeout)
    interface = getattr(conn.config, "get_interface", lambda: None)() or "public"
    return Collector(conn.session, central_region, interface, timeout)
