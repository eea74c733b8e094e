"""Pure builders: the body of a regional copy of a central object.

A copy keeps the central UUID, segment, CIDR, MAC and IPs; what is regional
(availability-zone hints, the subnet's gateway, its pools) is rewritten here.
Kept free of Neutron imports so the rules are unit-tested on their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import netaddr

PROVIDER_KEYS = ("provider:network_type", "provider:physical_network", "provider:segmentation_id")
_NETWORK_KEYS = ("id", "name", "project_id", "admin_state_up", "shared", "description", "mtu",
                 "port_security_enabled", *PROVIDER_KEYS)
_SUBNET_KEYS = ("id", "name", "network_id", "project_id", "ip_version", "cidr", "enable_dhcp",
                "dns_nameservers", "host_routes", "ipv6_ra_mode", "ipv6_address_mode", "description")
_RULE_KEYS = ("direction", "ethertype", "protocol", "port_range_min", "port_range_max",
              "remote_ip_prefix", "remote_group_id", "remote_address_group_id", "description")

# What a user may set on a central port and its regional copy must show; binding
# fields are the region's own (it reports them to central, not the reverse).
PORT_FIELDS = ("name", "description", "admin_state_up", "security_groups", "port_security_enabled",
               "allowed_address_pairs", "extra_dhcp_opts", "fixed_ips", "mac_address")


# IPv6 address modes whose addresses derive from the MAC (neutron_lib's
# IPV6_SLAAC, DHCPV6_STATELESS): a copy with the same MAC gets the same address,
# Neutron refuses explicit addresses there, and no address is reserved for them.
MAC_DERIVED_MODES = ("slaac", "dhcpv6-stateless")


def addresses_from_mac(subnet: Mapping[str, Any]) -> bool:
    """Whether the subnet's addresses derive from the port's MAC (IPv6 SLAAC or stateless DHCPv6)."""
    return subnet.get("ipv6_address_mode") in MAC_DERIVED_MODES


def allowed_here(network: Mapping[str, Any], region: str, availability_zone: str) -> bool:
    """Whether a central network may have a copy in this region (its AZ hints)."""
    hints = network.get("availability_zone_hints") or []
    return not hints or region in hints or (bool(availability_zone) and availability_zone in hints)


def network_body(central: Mapping[str, Any]) -> dict[str, Any]:
    body = {k: central[k] for k in _NETWORK_KEYS if central.get(k) is not None}
    # Faithful: an external network is external in every region (its floating IPs
    # and router gateways come from central's pool, like every other address).
    body["router:external"] = bool(central.get("router:external"))
    body["availability_zone_hints"] = []
    return body


def region_pools(cidr: str, pools: Iterable[Mapping[str, str]], central_gateway: str | None,
                 region_gateway: str | None) -> list[dict[str, str]]:
    """Central pools minus this region's gateway, plus central's gateway back in,
    within the addresses a pool may hold (not the network or broadcast address).

    Regional pools are cosmetic (every regional port carries an IP allocated at
    central), but they must not hand out the regional gateway address."""
    network = netaddr.IPNetwork(cidr)
    usable = netaddr.IPSet(network)
    usable.remove(network.network)
    if network.version == 4 and network.size > 2:
        usable.remove(network.broadcast)
    ips = netaddr.IPSet()
    for pool in pools:
        ips.add(netaddr.IPRange(pool["start"], pool["end"]))
    if central_gateway:
        ips.add(central_gateway)
    if region_gateway:
        ips.remove(region_gateway)
    ips &= usable
    return [{"start": str(r[0]), "end": str(r[-1])} for r in ips.iter_ipranges()]


def subnet_body(central: Mapping[str, Any], region_gateway: str | None) -> dict[str, Any]:
    body = {k: central[k] for k in _SUBNET_KEYS if central.get(k) is not None}
    if central.get("gateway_ip") and region_gateway:
        body["gateway_ip"] = region_gateway
        body["allocation_pools"] = region_pools(central["cidr"], central.get("allocation_pools") or [],
                                                central["gateway_ip"], region_gateway)
    else:
        body["gateway_ip"] = central.get("gateway_ip")
        body["allocation_pools"] = central.get("allocation_pools") or []
    return body


def port_body(central: Mapping[str, Any], request: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A regional port with central's UUID, MAC and IPs; placement fields from
    the regional request (Nova sets device and host there)."""
    body: dict[str, Any] = {
        "id": central["id"],
        "network_id": central["network_id"],
        "project_id": central["project_id"],
        "mac_address": central["mac_address"],
        "fixed_ips": [{"subnet_id": ip["subnet_id"], "ip_address": ip["ip_address"]}
                      for ip in central.get("fixed_ips") or []],
        "name": central.get("name") or "",
        "description": central.get("description") or "",
        "admin_state_up": central.get("admin_state_up", True),
        "device_id": central.get("device_id") or "",
        "device_owner": central.get("device_owner") or "",
    }
    if central.get("security_groups") is not None:
        body["security_groups"] = list(central["security_groups"])
    if central.get("port_security_enabled") is not None:
        body["port_security_enabled"] = central["port_security_enabled"]
    if central.get("allowed_address_pairs"):
        body["allowed_address_pairs"] = central["allowed_address_pairs"]
    if central.get("extra_dhcp_opts"):
        body["extra_dhcp_opts"] = dhcp_opts(central["extra_dhcp_opts"])
    for key, value in (request or {}).items():
        if key in ("name", "device_id", "device_owner", "binding:host_id", "binding:vnic_type",
                   "binding:profile", "admin_state_up", "description") and value is not None:
            body[key] = value
    return body


def central_port_request(request: Mapping[str, Any], project_id: str) -> dict[str, Any]:
    """What a regional port create asks central to allocate (UUID, MAC, IPs)."""
    allowed = ("network_id", "name", "description", "admin_state_up", "mac_address", "fixed_ips",
               "security_groups", "port_security_enabled", "allowed_address_pairs", "extra_dhcp_opts", "device_id",
               "device_owner", "binding:vnic_type")
    body = {k: request[k] for k in allowed if k in request and _is_set(request[k])}
    body["project_id"] = project_id
    return body


def reusable_by(central_port: Mapping[str, Any], project_id: str) -> bool:
    """Whether a regional create naming ``central_port``'s address may take that
    port as its own: the caller's port, free (no device, not bound, not a network
    port such as central's DHCP reservation)."""
    owner = central_port.get("device_owner") or ""
    return (central_port.get("project_id") == project_id and not owner.startswith("network:")
            and not central_port.get("device_id") and not central_port.get("binding:host_id"))


def dhcp_opts(options: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """extra_dhcp_opts as a request carries them (GET answers add nothing else today,
    but only these three keys are writable)."""
    return [{"opt_name": o["opt_name"], "opt_value": o.get("opt_value"), "ip_version": o.get("ip_version", 4)}
            for o in options]


def rule_key(rule: Mapping[str, Any]) -> tuple:
    """What makes two security-group rules the same rule (ids differ per region)."""
    return tuple(_normal(rule.get(k)) for k in _RULE_KEYS if k != "description")


def rule_body(rule: Mapping[str, Any], security_group_id: str, all_keys: bool = False) -> dict[str, Any]:
    """A rule for ``security_group_id``. ``all_keys``: every attribute present
    (None if unset), as Neutron's plugin layer expects below the API."""
    body = {k: rule.get(k) for k in _RULE_KEYS if all_keys or rule.get(k) is not None}
    body["security_group_id"] = security_group_id
    return body


def security_group_body(central: Mapping[str, Any]) -> dict[str, Any]:
    body = {k: central[k] for k in ("id", "name", "description", "project_id", "stateful")
            if central.get(k) is not None}
    return body


def _normal(value: Any) -> Any:
    if isinstance(value, str):
        return value.lower() if value in ("IPv4", "IPv6", "TCP", "UDP", "ICMP") else value
    return value


def _is_set(value: Any) -> bool:
    # neutron-lib's ATTR_NOT_SPECIFIED is a sentinel object, not a plain value.
    return value is not None and type(value).__name__ != "Sentinel"


def changed_fields(central: Mapping[str, Any], copy: Mapping[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """Fields whose central value differs from the copy's (order-insensitive lists)."""
    out = {}
    for key in fields:
        want, have = central.get(key), copy.get(key)
        if isinstance(want, list) and isinstance(have, list):
            if sorted(map(repr, want)) == sorted(map(repr, have)):
                continue
        elif want == have:
            continue
        out[key] = want
    return out


def port_changes(central: Mapping[str, Any], copy: Mapping[str, Any]) -> dict[str, Any]:
    """The update that makes a regional copy show central's user-settable fields."""
    changes = changed_fields(central, copy, [f for f in PORT_FIELDS if f not in ("fixed_ips", "extra_dhcp_opts")])
    if _fixed(central) != _fixed(copy):
        changes["fixed_ips"] = [{"subnet_id": s, "ip_address": a} for s, a in sorted(_fixed(central))]
    want, have = _options(central), _options(copy)
    if want != have:
        # Neutron merges extra_dhcp_opts on update; an option is removed by a None value.
        changes["extra_dhcp_opts"] = dhcp_opts(central.get("extra_dhcp_opts") or []) + [
            {"opt_name": name, "opt_value": None, "ip_version": version}
            for (name, version) in sorted(set(have) - set(want))]
    return changes


def _fixed(port: Mapping[str, Any]) -> set[tuple[str, str]]:
    return {(ip["subnet_id"], ip["ip_address"]) for ip in port.get("fixed_ips") or []}


def _options(port: Mapping[str, Any]) -> dict[tuple[str, int], Any]:
    return {(o["opt_name"], int(o.get("ip_version") or 4)): o.get("opt_value")
            for o in port.get("extra_dhcp_opts") or []}
