"""The topology model: where every piece of a stretched network lives.

Pure functions turn raw API answers (a :class:`Snapshot`: Neutron, Nova and
Admin API JSON as the services return it) into a :class:`Topology`, so the
unit tests feed recorded answers and the CLI, the dot renderer and the web page
share one model. Nothing here does I/O (:mod:`isthmus.topology.collect` does).

The model follows docs/networking.md: central Neutron owns each network; a
region holds a copy under the same UUID (same segment); a server's port is
bound in one region and shadowed (device owner ``compute:shadow``, same UUID)
in every other region that has ports of its own on the network; a router has
a half (description ``isthmus:half-of:<router>``) in every region it reaches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from isthmus.network import SHADOW_OWNER, TRANSIT_TAG, bound_region, shadow_port_id

Raw = dict[str, Any]

# Attributes a regional copy takes from central (isthmus/network/copies.py);
# a difference is drift: network_sync has not (yet) carried a change over.
NETWORK_DRIFT_KEYS = ("name", "admin_state_up", "shared", "description", "mtu", "port_security_enabled",
                      "provider:network_type", "provider:physical_network", "provider:segmentation_id",
                      "router:external")
ROUTER_DRIFT_KEYS = ("name", "admin_state_up")
HALF_TAG = "isthmus:half-of:"
ROUTER_INTERFACE_PREFIX = "network:router_interface"


# -- input: raw answers -------------------------------------------------------------


@dataclass
class RegionSnapshot:
    """What one region's APIs answered. ``None`` means "could not be read" (the
    reason is in ``errors``, keyed by API), never "empty"."""

    name: str
    networks: list[Raw] | None = None
    ports: list[Raw] | None = None
    routers: list[Raw] | None = None
    servers: list[Raw] | None = None
    # The L2 backend its agents report ("ovn", "ovs"); None: unknown (agents are
    # admin-only, or the region reports none).
    backend: str | None = None
    errors: dict[str, str] = field(default_factory=dict)


@dataclass
class Snapshot:
    central: RegionSnapshot
    regions: list[RegionSnapshot]
    pods: list[Raw] | None = None
    jobs: list[Raw] | None = None  # NEW, RUNNING and FAIL jobs (detail view)
    admin_error: str | None = None
    admin_reachable: bool = True  # False: the Admin API did not answer (a 403 did answer)
    collected_at: str = ""


# -- output: the model ----------------------------------------------------------------


@dataclass
class RegionView:
    name: str
    central: bool
    availability_zone: str | None
    healthy: bool
    errors: dict[str, str]
    backend: str | None = None


@dataclass
class Drift:
    attribute: str
    central: Any
    region: Any


@dataclass
class PortView:
    id: str
    region: str
    role: str  # "server", "transit", "shadow"
    network_id: str
    mac_address: str | None
    ips: list[str]
    status: str | None
    host: str | None
    server_id: str | None = None
    server_name: str | None = None
    raw: Raw = field(default_factory=dict)


@dataclass
class NetworkCopy:
    """A network in one region: central's own record in the central region, a
    regional copy elsewhere; ``present`` False when the region holds none."""

    region: str
    present: bool
    network_type: str | None = None
    segmentation_id: int | None = None
    status: str | None = None
    drift: list[Drift] = field(default_factory=list)
    servers: list[PortView] = field(default_factory=list)
    shadows: list[PortView] = field(default_factory=list)
    missing_shadows: list[str] = field(default_factory=list)  # ids of ports bound elsewhere, unshadowed here
    # An ML2/OVN region holds no shadows: the worker carries ports bound elsewhere
    # as OVN remote ports (docs/ovn.md), which only its databases show; these are
    # the ports it carries, by central's record.
    remote_ports: list[PortView] = field(default_factory=list)
    # Copies and shadows of ports central does not have: kept (no delete without
    # central's tombstone), shown so an operator can see and decide.
    orphans: list[str] = field(default_factory=list)
    unknown: bool = False  # the region could not be read
    raw: Raw = field(default_factory=dict)

    @property
    def drifted(self) -> bool:
        return bool(self.drift or self.missing_shadows or self.orphans)


@dataclass
class NetworkBand:
    id: str
    name: str
    project_id: str | None
    network_type: str | None
    segmentation_id: int | None
    transit: bool
    copies: dict[str, NetworkCopy]  # region name -> copy, central region first
    raw: Raw = field(default_factory=dict)

    @property
    def drifted(self) -> bool:
        return any(c.drifted for c in self.copies.values())


@dataclass
class RouterHalf:
    region: str
    id: str
    name: str | None
    status: str | None
    gateway: bool
    routes: int
    drift: list[Drift] = field(default_factory=list)
    raw: Raw = field(default_factory=dict)


@dataclass
class RouterView:
    id: str
    name: str
    project_id: str | None
    status: str | None
    halves: dict[str, RouterHalf]
    raw: Raw = field(default_factory=dict)


@dataclass
class FailedJob:
    id: str
    type: str
    resource_id: str
    project_id: str | None
    failures: int
    last_error: str | None
    updated_at: str | None
    raw: Raw = field(default_factory=dict)


@dataclass
class JobsView:
    counts: dict[str, int]  # of the states read (NEW, RUNNING, FAIL)
    backlog: int  # NEW + RUNNING
    failed: list[FailedJob]
    error: str | None = None


@dataclass
class Topology:
    collected_at: str
    central_region: str
    regions: list[RegionView]
    networks: list[NetworkBand]
    routers: list[RouterView]
    jobs: JobsView

    def region(self, name: str) -> RegionView | None:
        return next((r for r in self.regions if r.name == name), None)

    def to_dict(self, raw: bool = True) -> dict[str, Any]:
        """JSON-ready; ``raw=False`` drops the API answers behind each box (the CLI's default)."""
        data = dataclasses.asdict(self)
        return data if raw else _without_raw(data)


# -- building ----------------------------------------------------------------------


def build(snapshot: Snapshot) -> Topology:
    """The model of ``snapshot``: one band per central network, one row per router."""
    return Topology(
        collected_at=snapshot.collected_at,
        central_region=snapshot.central.name,
        regions=build_regions(snapshot),
        networks=[build_network(net, snapshot.central, snapshot.regions)
                  for net in sorted(snapshot.central.networks or [], key=_name_key)],
        routers=[build_router(router, snapshot.regions)
                 for router in sorted(snapshot.central.routers or [], key=_name_key)],
        jobs=build_jobs(snapshot.jobs, snapshot.admin_error),
    )


def build_regions(snapshot: Snapshot) -> list[RegionView]:
    """Central first, then the regions; a region is healthy when every API of it answered.
    The Admin API lives in the central region, so its failure marks central."""
    zones = {p.get("region_name"): p.get("az_name") or None for p in snapshot.pods or []}
    central_errors = dict(snapshot.central.errors)
    if snapshot.admin_error and not snapshot.admin_reachable:
        central_errors["multiregion"] = snapshot.admin_error
    views = [RegionView(snapshot.central.name, True, None, not central_errors, central_errors)]
    views += [RegionView(r.name, False, zones.get(r.name), not r.errors, dict(r.errors), r.backend)
              for r in snapshot.regions]
    return views


def build_network(central_net: Raw, central: RegionSnapshot, regions: Sequence[RegionSnapshot]) -> NetworkBand:
    net_id = central_net["id"]
    central_ports = [p for p in central.ports or [] if p.get("network_id") == net_id]
    servers = _server_names([*regions])
    copies = {central.name: NetworkCopy(
        region=central.name, present=True, network_type=central_net.get("provider:network_type"),
        segmentation_id=central_net.get("provider:segmentation_id"), status=central_net.get("status"),
        raw=central_net)}
    for region in regions:
        copies[region.name] = build_copy(central_net, central_ports, region, servers)
    return NetworkBand(
        id=net_id, name=central_net.get("name") or "", project_id=central_net.get("project_id"),
        network_type=central_net.get("provider:network_type"),
        segmentation_id=central_net.get("provider:segmentation_id"),
        transit=(central_net.get("description") or "").startswith(TRANSIT_TAG),
        copies=copies, raw=central_net)


def build_copy(central_net: Raw, central_ports: Sequence[Raw], region: RegionSnapshot,
               server_names: Mapping[str, str]) -> NetworkCopy:
    """``region``'s copy of ``central_net``: its segment, drift from central, the
    servers bound there (central's record of where each port is bound) and the
    shadows it holds, and the shadows it should hold but lacks."""
    net_id = central_net["id"]
    bound_here = [_port_view(p, region.name, server_names) for p in central_ports
                  if _is_user_port(p) and bound_region(p) == region.name]
    if region.networks is None:
        # Unreadable region: central still says which servers are bound there.
        return NetworkCopy(region=region.name, present=False, unknown=True, servers=bound_here)
    copy = next((n for n in region.networks if n.get("id") == net_id), None)
    if copy is None:
        return NetworkCopy(region=region.name, present=False, servers=bound_here)
    local_ports = [p for p in region.ports or [] if p.get("network_id") == net_id]
    originals = {p["id"]: p for p in central_ports}
    readable = region.ports is not None
    if region.backend == "ovn":
        # No shadows on OVN: the worker carries these as remote ports instead.
        shadows: list[PortView] = []
        remote = [_port_view(p, bound_region(p) or "", server_names, role="remote")
                  for p in carried_elsewhere(central_net, central_ports, region.name, local_ports)]
        missing: list[str] = []
    else:
        shadows = [_stand_in_for(_port_view(p, region.name, server_names, role="shadow"), originals, server_names)
                   for p in local_ports if p.get("device_owner") == SHADOW_OWNER]
        remote = []
        missing = missing_shadows(central_net, central_ports, region.name, local_ports) if readable else []
    return NetworkCopy(
        region=region.name, present=True, network_type=copy.get("provider:network_type"),
        segmentation_id=copy.get("provider:segmentation_id"), status=copy.get("status"),
        drift=drift(central_net, copy, NETWORK_DRIFT_KEYS), servers=bound_here, shadows=shadows,
        missing_shadows=missing, remote_ports=remote,
        orphans=orphans(central_ports, local_ports) if readable else [], raw=copy)


def drift(central: Mapping[str, Any], copy: Mapping[str, Any], keys: Iterable[str]) -> list[Drift]:
    """The attributes of ``keys`` whose value differs between central and a copy.
    A key the copy's API does not show (an extension off there) is no drift."""
    return [Drift(k, central.get(k), copy.get(k)) for k in keys
            if k in copy and _normal(central.get(k)) != _normal(copy.get(k))]


def missing_shadows(central_net: Raw, central_ports: Sequence[Raw], region: str,
                    local_ports: Sequence[Raw]) -> list[str]:
    """Ports bound in another region that ``region`` should shadow and does not."""
    held = {p["id"] for p in local_ports}
    return sorted(p["id"] for p in carried_elsewhere(central_net, central_ports, region, local_ports)
                  if p["id"] not in held)


def carried_elsewhere(central_net: Raw, central_ports: Sequence[Raw], region: str,
                      local_ports: Sequence[Raw]) -> list[Raw]:
    """Ports bound in another region that ``region`` must reach (as shadows, or on
    OVN as remote ports). The rule of the port reconciler
    (isthmus/network/reconcilers/plans.py): a VxLAN network's region that has ports
    of its own on it (servers or router interfaces, bound) carries every server
    port bound elsewhere."""
    if central_net.get("provider:network_type") != "vxlan" or not any(_is_member(p) for p in local_ports):
        return []
    return [p for p in central_ports if _is_user_port(p) and bound_region(p) not in (None, region)]


def orphans(central_ports: Sequence[Raw], local_ports: Sequence[Raw]) -> list[str]:
    """Regional user ports and shadows whose central port is gone: either its
    delete is still being carried over, or central lost it without a tombstone
    (then nothing removes them: see docs/networking.md, "Deleted only on proof").
    The reconcilers' ``plans.missing_at_central`` rule, restated: importing it would
    load the whole reconciler package (and the database layer) into the topology."""
    central = {p["id"] for p in central_ports}
    return sorted(p["id"] for p in local_ports
                  if p["id"] not in central and not (p.get("device_owner") or "").startswith("network:"))


def build_router(central_router: Raw, regions: Sequence[RegionSnapshot]) -> RouterView:
    router_id = central_router["id"]
    halves: dict[str, RouterHalf] = {}
    for region in regions:
        for half in region.routers or []:
            if (half.get("description") or "") == HALF_TAG + router_id:
                gateway = half.get("external_gateway_info") or None
                halves[region.name] = RouterHalf(
                    region=region.name, id=half["id"], name=half.get("name"), status=half.get("status"),
                    gateway=bool(gateway and gateway.get("network_id")), routes=len(half.get("routes") or []),
                    drift=drift(central_router, half, ROUTER_DRIFT_KEYS), raw=half)
    return RouterView(id=router_id, name=central_router.get("name") or "", project_id=central_router.get("project_id"),
                      status=central_router.get("status"), halves=halves, raw=central_router)


def build_jobs(jobs: Sequence[Raw] | None, error: str | None) -> JobsView:
    if jobs is None:
        return JobsView(counts={}, backlog=0, failed=[], error=error or "jobs not read")
    counts = {state: 0 for state in ("NEW", "RUNNING", "FAIL")}
    for job in jobs:
        status = str(job.get("status", "")).upper()
        counts[status] = counts.get(status, 0) + 1
    failed = [FailedJob(id=j["id"], type=j.get("type", ""), resource_id=j.get("resource_id", ""),
                        project_id=j.get("project_id"), failures=int(j.get("failures") or 0),
                        last_error=j.get("last_error"), updated_at=j.get("updated_at"), raw=j)
              for j in jobs if str(j.get("status", "")).upper() == "FAIL"]
    failed.sort(key=lambda j: j.updated_at or "", reverse=True)
    return JobsView(counts=counts, backlog=counts["NEW"] + counts["RUNNING"], failed=failed, error=error)


def only_network(topology: Topology, name_or_id: str) -> Topology:
    """The model narrowed to one network (by id, else by a unique name). Routers
    are dropped: a router spans networks, and ``--network`` asks about one."""
    found = [n for n in topology.networks if n.id == name_or_id] or \
        [n for n in topology.networks if n.name == name_or_id]
    if not found:
        raise LookupError(f"no central network with id or name {name_or_id!r}")
    if len(found) > 1:
        raise LookupError(f"{len(found)} central networks are named {name_or_id!r}: give its id")
    return dataclasses.replace(topology, networks=found, routers=[])


# -- helpers -----------------------------------------------------------------------


def _port_view(port: Raw, region: str, server_names: Mapping[str, str], role: str | None = None) -> PortView:
    owner = port.get("device_owner") or ""
    if role is None:
        role = "transit" if owner == "compute:isthmus-transit" else "server"
    device = port.get("device_id") or None
    # A shadow carries its original's id as its own and in its name.
    port_id = (shadow_port_id(port.get("name")) or port["id"]) if role == "shadow" else port["id"]
    return PortView(
        id=port_id, region=region, role=role, network_id=port.get("network_id", ""),
        mac_address=port.get("mac_address"), ips=[ip.get("ip_address", "") for ip in port.get("fixed_ips") or []],
        status=port.get("status"), host=port.get("binding:host_id") or None,
        server_id=device if owner.startswith("compute:") else None,
        server_name=server_names.get(device or ""), raw=port)


def _stand_in_for(shadow: PortView, originals: Mapping[str, Raw], server_names: Mapping[str, str]) -> PortView:
    """A shadow names the server of the port it stands for (it has no device of its own)."""
    device = (originals.get(shadow.id) or {}).get("device_id") or None
    return dataclasses.replace(shadow, server_id=device, server_name=server_names.get(device or ""))


def _is_user_port(port: Mapping[str, Any]) -> bool:
    owner = port.get("device_owner") or ""
    return owner.startswith("compute:") and owner != SHADOW_OWNER


def _is_member(port: Mapping[str, Any]) -> bool:
    """A server's port or a router interface, bound here (``plans.has_local_members``
    restated: an unbound port needs no shadows, so none is counted missing)."""
    owner = port.get("device_owner") or ""
    return (_is_user_port(port) or owner.startswith(ROUTER_INTERFACE_PREFIX)) and bool(port.get("binding:host_id"))


def _server_names(regions: Iterable[RegionSnapshot]) -> dict[str, str]:
    return {s["id"]: s.get("name") or "" for r in regions for s in r.servers or [] if "id" in s}


def _normal(value: Any) -> Any:
    # Neutron shows an unset description as "" or None depending on the path.
    return None if value == "" else value


def _name_key(item: Mapping[str, Any]) -> tuple[str, str]:
    return (item.get("name") or "", item.get("id") or "")


def _without_raw(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _without_raw(v) for k, v in data.items() if k != "raw"}
    if isinstance(data, list):
        return [_without_raw(v) for v in data]
    return data
