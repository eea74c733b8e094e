"""Who is a member of a security group, as remote-group wiring sees it.

Shared by central, which queues one ``sg_member_sync`` per (group, address) a
port event may have changed (``member_pairs``, ``member_key``), and by the
reconcilers, which keep each region's address groups to these members
(reconcilers/address_groups.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from isthmus.network import SHADOW_OWNER, bound_region


def cidr(address: str) -> str:
    """An address (or prefix) as Neutron stores it in an address group."""
    net = ipaddress.ip_network(address, strict=False)
    return f"{net.network_address}/{net.prefixlen}"


def is_member(port: Mapping[str, Any], group_id: str) -> bool:
    """A VM port of the group that is bound somewhere (shadows are not members)."""
    owner = port.get("device_owner") or ""
    return (owner.startswith("compute:") and owner != SHADOW_OWNER and group_id in (port.get("security_groups") or [])
            and bound_region(port) is not None)


def addresses_of(port: Mapping[str, Any]) -> set[str]:
    return {cidr(ip["ip_address"]) for ip in port.get("fixed_ips") or [] if ip.get("ip_address")}


def member_pairs(port: Mapping[str, Any] | None, before: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    """(security group, address) pairs whose membership a port event may have
    changed: every group and address of the port before and after, when it
    was or is a member of anything and its groups, addresses or region changed."""
    port, before = port or {}, before or {}

    def state(p: Mapping[str, Any]) -> tuple[frozenset[str], frozenset[str], str | None]:
        groups = frozenset(g for g in p.get("security_groups") or [] if is_member(p, g))
        return groups, frozenset(addresses_of(p)) if groups else frozenset(), bound_region(p)

    now, was = state(port), state(before)
    if now == was:
        return set()
    # A move between regions yields the same pairs: every region's view of them changes.
    return {(g, a) for (groups, addrs, _) in (now, was) for g in groups for a in addrs}


def member_key(group_id: str, address: str) -> str:
    """The ``sg_member_sync`` job key of a pair."""
    return f"{group_id}#{cidr(address)}"
