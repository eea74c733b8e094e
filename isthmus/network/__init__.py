"""Cross-region networking: central plugin, local plugin, reconcile jobs.

Contracts between the parts (all over public REST APIs, see docs/networking.md):

* central Neutron owns every network, subnet, port and security group and
  allocates every UUID, MAC and IP;
* a regional Neutron (local plugin) copies a central object on first use with
  the same UUID, and creates user ports at central first;
* the local plugin reports port bindings to central in ``binding:profile``
  under :data:`PROFILE_KEY`; central records them and queues reconcile jobs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# binding:profile key carrying a region's report of where a port is bound.
PROFILE_KEY = "isthmus"
# device_owner of a copy of a port that lives in another region (for L2 / SG membership).
SHADOW_OWNER = "compute:shadow"
SHADOW_PREFIX = "shadow_port_"
# device_owner at central of a router half's port on its router's transit
# network. "compute:" on purpose: like a server's port it lives in one region,
# is reported bound there and shadowed in the others; in its region it is a
# router interface. Port security is off on transit networks, so no group
# membership follows from it.
TRANSIT_OWNER = "compute:isthmus-transit"
TRANSIT_PORT_PREFIX = "isthmus-transit-"  # + the region of the router half the port belongs to
# Description of a router's transit network (central and its regional copies).
TRANSIT_TAG = "isthmus:transit-of:"
# Central reservations: the DHCP address every region shares, and one gateway
# address per region, named so any region can find them. Owners network:dhcp and
# network:distributed are ones Neutron removes by itself with their subnet/network.
DHCP_RESERVATION_DEVICE = "reserved_dhcp_port"
GATEWAY_RESERVATION_DEVICE = "reserved_gateway_port"


def dhcp_reservation_name(subnet_id: str) -> str:
    return f"dhcp_port_{subnet_id}"


def gateway_reservation_name(region: str, subnet_id: str) -> str:
    return f"interface_{region}_{subnet_id}"


def shadow_port_name(port_id: str) -> str:
    return f"{SHADOW_PREFIX}{port_id}"


def shadow_port_id(name: str | None) -> str | None:
    if name and name.startswith(SHADOW_PREFIX):
        return name[len(SHADOW_PREFIX):]
    return None


def binding_report(port: Mapping[str, Any]) -> dict[str, Any] | None:
    """The report a region left in a port's ``binding:profile`` (None: none)."""
    profile = port.get("binding:profile") or {}
    report = profile.get(PROFILE_KEY) if isinstance(profile, dict) else None
    return report if isinstance(report, dict) else None


def bound_region(port: Mapping[str, Any]) -> str | None:
    """The region a port was reported bound in (None: unbound)."""
    if not port.get("binding:host_id"):
        return None
    return (binding_report(port) or {}).get("region")


def reported_agent(port: Mapping[str, Any]) -> dict[str, str] | None:
    """The L2 agent a region reported for a port's host: {type, host, tunnel_ip}."""
    agent = (binding_report(port) or {}).get("agent")
    if isinstance(agent, dict) and agent.get("type") and agent.get("host") and agent.get("tunnel_ip"):
        return {"type": str(agent["type"]), "host": str(agent["host"]), "tunnel_ip": str(agent["tunnel_ip"])}
    return None


def port_report(region: str, port: Mapping[str, Any], agent: Mapping[str, str] | None) -> dict[str, Any]:
    """What a region tells central of a port it holds: where it is bound (host,
    VIF, the host's L2 agent) in ``binding:profile``, or that it is unbound.
    One builder for the local plugin's reports and the worker's repairs."""
    host = port.get("binding:host_id") or ""
    report: dict[str, Any] = {
        "binding:host_id": host,
        "device_owner": port.get("device_owner") or "",
        "device_id": port.get("device_id") or "",
        "binding:profile": {},
    }
    if host:
        binding: dict[str, Any] = {
            "region": region,
            "vif_type": port.get("binding:vif_type"),
            "vif_details": port.get("binding:vif_details") or {},
            "vnic_type": port.get("binding:vnic_type"),
        }
        if agent:
            binding["agent"] = dict(agent)
        report["binding:profile"] = {PROFILE_KEY: binding}
    return report


REPORTED_FIELDS = ("binding:host_id", "device_owner", "device_id", "binding:profile")


def report_differs(central: Mapping[str, Any], report: Mapping[str, Any]) -> bool:
    return any(central.get(k) != report.get(k) for k in REPORTED_FIELDS)
