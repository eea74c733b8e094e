"""Node addresses from a server, its ports and trunk subports (OCCM rules).

Pure functions over :mod:`isthmus.ccm.openstack.model` records: the caller fetches the
ports and resolves subports (see instances.py); nothing here does I/O. The
order of the steps and the add/remove primitives are OCCM's, because the
result order is visible to users (kubelet, ``kubectl get nodes -o wide``).
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Iterable, Sequence

from isthmus.ccm.config import NetworkingOptions
from isthmus.ccm.openstack.model import (
    EXTERNAL_IP,
    HOSTNAME,
    INTERNAL_IP,
    NodeAddress,
    Port,
    Server,
    ServerAddress,
    Subport,
)

LOG = logging.getLogger(__name__)

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_PREFIX = re.compile(r"[0-9]+")


def is_ipv6(address: str) -> bool:
    """Anything that is not IPv4 counts as IPv6 (unparsable strings too).

    v4-mapped IPv6 (``::ffff:a.b.c.d``) is IPv4, as Go's ``To4`` says.
    """
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return True
    return ip.version == 6 and ip.ipv4_mapped is None


def _add(out: list[NodeAddress], address: str, kind: str) -> None:
    """Append unless the same address with the same type is already there."""
    entry = NodeAddress(kind, address)
    if entry not in out:
        out.append(entry)


def _remove(out: list[NodeAddress], address: str) -> None:
    """Drop every entry for ``address``, whatever its type."""
    out[:] = [a for a in out if a.address != address]


def node_addresses(
    server: Server,
    ports: Sequence[Port],
    subports: Sequence[Subport],
    opts: NetworkingOptions,
) -> list[NodeAddress]:
    """OCCM's nodeAddresses, step by step (docs/ccm.md, "What it does": addresses)."""
    skip_v6 = opts.ipv6_support_disabled
    out: list[NodeAddress] = []

    # 1. fixed IPs of ACTIVE ports, in Neutron's order
    for port in ports:
        for ip in port.fixed_ips:
            if port.status == "ACTIVE" and not (skip_v6 and is_ipv6(ip)):
                _add(out, ip, INTERNAL_IP)

    # 2. access IPs
    if server.access_ipv4:
        _add(out, server.access_ipv4, EXTERNAL_IP)
    if server.access_ipv6 and not skip_v6:
        _add(out, server.access_ipv6, EXTERNAL_IP)

    # 3. the hostname from server metadata
    if server.metadata.get("hostname"):
        _add(out, server.metadata["hostname"], HOSTNAME)

    # 4. trunk subports join the server's addresses under their network name
    networks: dict[str, list[ServerAddress]] = {name: list(entries) for name, entries in server.addresses.items()}
    for sub in subports:
        for ip in sub.fixed_ips:
            if not (skip_v6 and is_ipv6(ip)):
                networks.setdefault(sub.network_name, []).append(ServerAddress(ip, "fixed"))

    # 5. classify per network, networks in lexicographic order
    public = set(opts.public_network_name)
    internal = set(opts.internal_network_name)
    for name in sorted(networks):
        for entry in networks[name]:
            if entry.type == "floating":
                kind = EXTERNAL_IP
            elif name in public:
                _remove(out, entry.addr)  # a public fixed IP is not also internal
                kind = EXTERNAL_IP
            elif not internal or name in internal:
                kind = INTERNAL_IP
            else:
                _remove(out, entry.addr)  # neither internal nor public: hide it
                continue
            if not (skip_v6 and is_ipv6(entry.addr)):
                _add(out, entry.addr, kind)

    # 6. optional CIDR preference order
    if opts.address_sort_order:
        out = sort_node_addresses(out, parse_address_sort_order(opts.address_sort_order))
    return out


def parse_address_sort_order(text: str) -> list[IPNetwork]:
    """CIDRs separated by commas and/or whitespace; invalid items are skipped."""
    networks: list[IPNetwork] = []
    for item in re.split(r"[,\s]+", text):
        if not item:
            continue
        network = _parse_cidr(item)
        if network is None:
            LOG.warning("address-sort-order: %r is not a valid CIDR, ignored", item)
        else:
            networks.append(network)
    return networks


def _parse_cidr(item: str) -> IPNetwork | None:
    """Like Go's ParseCIDR: ``ADDR/BITS`` with decimal BITS; host bits allowed."""
    addr, slash, prefix = item.partition("/")
    if not slash or not _PREFIX.fullmatch(prefix) or "%" in addr:
        return None
    try:
        return ipaddress.ip_network(f"{addr}/{int(prefix)}", strict=False)
    except ValueError:
        return None


def _as_ip(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def sort_priority(address: str, networks: Sequence[IPNetwork]) -> int:
    """``len(networks) - i`` for the first network ``i`` holding ``address``; 0 if none."""
    ip = _as_ip(address)
    if ip is None:
        return 0
    for index, network in enumerate(networks):
        if ip.version == network.version and ip in network:
            return len(networks) - index
    return 0


def _ip16(address: str) -> bytes:
    """Go's 16-byte form: IPv4 as v4-mapped IPv6, for byte-wise ordering."""
    ip = _as_ip(address)
    if ip is None:
        return b""
    if ip.version == 4:
        return b"\x00" * 10 + b"\xff\xff" + ip.packed
    return ip.packed


def sort_node_addresses(addresses: Iterable[NodeAddress], networks: Sequence[IPNetwork]) -> list[NodeAddress]:
    """Stable sort: higher priority first, then by IP bytes; priority 0 last, in place."""
    if not networks:
        return list(addresses)

    def key(entry: NodeAddress) -> tuple[int, bytes]:
        priority = sort_priority(entry.address, networks)
        return (-priority, _ip16(entry.address) if priority else b"")

    return sorted(addresses, key=key)
