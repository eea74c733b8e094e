"""What must hold once a fault is lifted and the system had time to converge
(the issue's invariants), as pure checks over a :class:`Snapshot`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from isthmus.network import SHADOW_OWNER, bound_region
from isthmus.network.reconcilers.plans import has_local_members, missing_at_central


@dataclass
class Snapshot:
    """One read of everything the checks need (the campaign's network only)."""

    central_ports: dict[str, dict[str, Any]]  # id -> port
    regional_ports: dict[str, list[dict[str, Any]]]  # region -> ports on the network
    servers: dict[str, dict[str, str]]  # region -> server id -> status
    failed_jobs: list[str] = field(default_factory=list)  # "type resource: error"
    overdue_jobs: list[str] = field(default_factory=list)


def _user_port(port: dict[str, Any]) -> bool:
    owner = port.get("device_owner") or ""
    return not owner.startswith("network:") and owner != SHADOW_OWNER


def _addresses(port: dict[str, Any]) -> list[str]:
    return sorted(ip["ip_address"] for ip in port.get("fixed_ips") or [])


def lost(snapshot: Snapshot, servers: dict[str, str], ports: set[str]) -> list[str]:
    """Objects the user made and did not delete that are gone."""
    found = []
    for server_id, region in sorted(servers.items()):
        if server_id not in snapshot.servers.get(region, {}):
            found.append(f"lost: server {server_id} in {region}")
    for port_id in sorted(ports - set(snapshot.central_ports)):
        found.append(f"lost: port {port_id} at central")
    return found


def bound_copies(snapshot: Snapshot, shadows: bool = True) -> list[str]:
    """Every central port bound in a region exists there with its MAC and IPs, and
    every other region with members on the network has exactly one shadow of it."""
    found = []
    for port_id, top in sorted(snapshot.central_ports.items()):
        region = bound_region(top)
        if not region or not _user_port(top) or region not in snapshot.regional_ports:
            continue
        copies = [p for p in snapshot.regional_ports[region] if p["id"] == port_id and _user_port(p)]
        if len(copies) != 1:
            found.append(f"bound: port {port_id} bound in {region}: {len(copies)} copies there")
        elif (copies[0].get("mac_address"), _addresses(copies[0])) != (top.get("mac_address"), _addresses(top)):
            found.append(f"bound: port {port_id} in {region} differs from central's MAC/IPs")
        if not shadows:
            continue
        for other, ports in sorted(snapshot.regional_ports.items()):
            if other == region or not has_local_members(ports):
                continue
            count = sum(1 for p in ports if p["id"] == port_id and p.get("device_owner") == SHADOW_OWNER)
            if count != 1:
                found.append(f"shadow: port {port_id} (bound in {region}) has {count} shadows in {other}")
    return found


def outlived(snapshot: Snapshot) -> list[str]:
    """Regional copies and shadows of ports central no longer has."""
    central = list(snapshot.central_ports.values())
    found = []
    for region, ports in sorted(snapshot.regional_ports.items()):
        gone = missing_at_central(central, ports)
        found += [f"stale: {p['id']} ({p.get('device_owner') or 'port'}) in {region}, gone at central"
                  for p in ports if p["id"] in gone]
    return found


def jobs(snapshot: Snapshot) -> list[str]:
    return [f"job failed: {j}" for j in snapshot.failed_jobs] + [f"job overdue: {j}" for j in snapshot.overdue_jobs]


def check(snapshot: Snapshot, servers: dict[str, str], ports: set[str], shadows: bool = True) -> list[str]:
    return [*lost(snapshot, servers, ports), *bound_copies(snapshot, shadows), *outlived(snapshot), *jobs(snapshot)]
