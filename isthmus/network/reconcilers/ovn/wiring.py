"""The OVN backend of cross-region L2 (docs/ovn.md): what ``port_sync`` and
``network_sync`` do in a region whose Neutron runs ML2/OVN, instead of shadow
ports (an OVN region never binds a shadow: its ports bind to chassis).

In each OVN region holding a copy of a network, it keeps:

* the agreed datapath key on Neutron's logical switch of the network, and the
  agreed key on each of Neutron's ports of the ports bound in the region;
* a remote chassis (Southbound, ``is-remote``) per hypervisor of another OVN
  region hosting a port of the network, with that hypervisor's geneve address;
* a ``type=remote`` logical switch port per such port (MAC, IPs, key, chassis).

Incremental (``sync_ports``: a batch of ports, read by name) and full (``sync_network``:
the periodic backstop), with the proof rules of shadows: a remote port goes only
when its port's delete is recorded (tombstone) or central says it is bound here
or nowhere, never because a list lacks it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from isthmus.clients.ovsdb import map_of
from isthmus.network import TRANSIT_OWNER, TRANSIT_PORT_PREFIX, bound_region
from isthmus.network.reconcilers import plans
from isthmus.network.reconcilers.ovn.plan import (
    EXT_PORT,
    Observed,
    RemoteChassis,
    RemotePort,
    Wanted,
    is_ours,
    plan,
    remote_port_name,
    unreferenced_chassis,
)
from isthmus.network.reconcilers.ovn.region import OvnRegion

LOG = logging.getLogger(__name__)


class KeySource(Protocol):
    """Central's tunnel keys (isthmus.registry.TunnelKeys)."""

    def network_key(self, network_id: str) -> int: ...

    def port_key(self, network_id: str, port_id: str) -> int: ...


class ChassisSource(Protocol):
    def of(self, region: str, host: str | None) -> RemoteChassis | None: ...


class Hypervisors:
    """Home chassis of remote ports, read from their regions' Southbound once per job."""

    def __init__(self, regions: Mapping[str, OvnRegion]) -> None:
        self.regions = regions
        self._found: dict[tuple[str, str], RemoteChassis | None] = {}

    def of(self, region: str, host: str | None) -> RemoteChassis | None:
        """The chassis of ``host`` in ``region``; ``host`` None: the region's
        interconnection chassis (where a distributed router port is reached)."""
        key = (region, host or "")
        if key not in self._found:
            home = self.regions.get(region)
            self._found[key] = None if home is None else home.hypervisor(host) if host else home.gateway()
        return self._found[key]


def home_of(port: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """Where a port lives: its region and host, from the region's binding report;
    or, for a router half's transit port, which an OVN region never binds (its
    routers are distributed), the half's region from the port's name and no host.
    None: unbound."""
    region = bound_region(port)
    if region:
        return region, port.get("binding:host_id") or None
    name = port.get("name") or ""
    if port.get("device_owner") == TRANSIT_OWNER and name.startswith(TRANSIT_PORT_PREFIX):
        return name[len(TRANSIT_PORT_PREFIX):], None
    return None


def addresses(port: Mapping[str, Any]) -> str:
    return " ".join([port["mac_address"], *(ip["ip_address"] for ip in port.get("fixed_ips") or [])])


def wanted_for(region: str, network_id: str, central_ports: Iterable[Mapping[str, Any]], keys: KeySource,
               hypervisors: ChassisSource, removable: Iterable[str] = ()) -> Wanted:
    """What ``region`` must hold for ``central_ports`` of the network (all of
    them, or the one an event names)."""
    local: dict[str, int] = {}
    remote: dict[str, RemotePort] = {}
    chassis: dict[str, RemoteChassis] = {}
    gone = set(removable)
    for port in central_ports:
        if not plans.is_compute(port):
            continue
        placed = home_of(port)
        home, host = placed if placed else (None, None)
        if home == region:
            local[port["id"]] = keys.port_key(network_id, port["id"])
            gone.add(port["id"])  # bound here now: a remote port of it would be a second copy
        elif home is None:
            gone.add(port["id"])
        else:
            where = hypervisors.of(home, host)
            if where is None:
                # An OVS region (no geneve to it: docs/ovn.md, mixed clouds), or a
                # chassis not registered yet (the next event or resync carries it).
                LOG.info("port %s (%s, host %s): no OVN chassis to reach it from %s", port["id"], home,
                         port.get("binding:host_id"), region)
                continue
            chassis[where.name] = where
            remote[port["id"]] = RemotePort(port["id"], network_id, home, where.name, addresses(port),
                                            keys.port_key(network_id, port["id"]))
    return Wanted(network_id, keys.network_key(network_id), local, remote, chassis, frozenset(gone))


def _converge(ovn: OvnRegion, wanted: Wanted, observed: Observed) -> None:
    """Read first (by the caller), then keys and home chassis only where the
    region holds the network: elsewhere nothing is allocated or read."""
    ops = plan(wanted, observed)
    for note in ops.notes:
        LOG.info("network %s in %s (OVN): %s", wanted.network_id, ovn.name, note)
    if ops:
        ovn.apply(ops)


def sync_ports(ovn: OvnRegion, network_id: str, central_ports: list[Mapping[str, Any]], deleted: list[str],
               keys: KeySource, hypervisors: ChassisSource) -> None:
    """Some ports' events in one OVN region (a batch of ``port_sync``): their rows
    read by name. ``deleted``: ids of ports whose delete central recorded."""
    port_ids = sorted({p["id"] for p in central_ports} | set(deleted))
    if not port_ids:
        return
    observed = ovn.observe(network_id, [n for pid in port_ids for n in (pid, remote_port_name(pid))])
    if observed.switch is None:
        return  # no copy of the network here
    wanted = wanted_for(ovn.name, network_id, list(central_ports), keys, hypervisors, removable=deleted)
    _converge(ovn, wanted, observed)


def sync_network(ovn: OvnRegion, network_id: str, central_ports: list[dict[str, Any]], keys: KeySource,
                 hypervisors: ChassisSource, buried: set[str]) -> None:
    """Every port of the network in one OVN region (the backstop). ``buried``: ids
    of ports whose delete central recorded (remote ports of them go)."""
    observed = ovn.observe(network_id)
    if observed.switch is None:
        return  # no copy of the network here
    wanted = wanted_for(ovn.name, network_id, central_ports, keys, hypervisors, removable=buried)
    known = {p["id"] for p in central_ports}
    unproven = sorted(row["name"] for row in observed.ports.values()
                      if is_ours(row) and _port_of(row) not in known and _port_of(row) not in buried)
    if unproven:
        LOG.warning("network %s in %s (OVN): central has no port for %s and recorded no delete: kept",
                    network_id, ovn.name, ", ".join(unproven))
    _converge(ovn, wanted, observed)


def _port_of(row: Mapping[str, Any]) -> str:
    return str(map_of(row.get("external_ids")).get(EXT_PORT, ""))


def collect_chassis(ovn: OvnRegion, grace: timedelta = timedelta(minutes=5),
                    seen: dict[str, datetime] | None = None) -> list[str]:
    """Remove our remote chassis no remote port names any more, once they have been
    unreferenced for ``grace`` (a concurrent job may be about to name one again).
    ``seen``: when each was first found unreferenced (kept by the caller)."""
    seen = {} if seen is None else seen
    unreferenced = unreferenced_chassis(list(ovn.chassis_rows().values()), ovn.remote_ports())
    now = datetime.now(UTC)
    for name in list(seen):
        if name not in unreferenced:
            del seen[name]
    due = [name for name in unreferenced if now - seen.setdefault(name, now) >= grace]
    if due:
        LOG.info("%s (OVN): removing remote chassis %s (no remote port names them)", ovn.name, ", ".join(due))
        ovn.delete_chassis(due)
        for name in due:
            seen.pop(name, None)
    return due
