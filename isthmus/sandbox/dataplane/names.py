"""Names of everything the dataplane creates, derived from the sandbox.

Only namespaces live in the machine's own network namespace, and their names
carry the sandbox's base port and a digest of its state directory, so two
sandboxes (or another engineer's) never collide and ``down`` removes exactly its
own. Links live inside those namespaces, where names need only be unique per
namespace; they still follow Neutron's agents (``brq``/``tap`` + id prefix,
``vxlan-<VNI>``) and stay within the kernel's 15 characters.
"""

from __future__ import annotations

import enum
import hashlib
import ipaddress

from isthmus.sandbox.layout import Layout

# Underlay of the compute hosts (TEST-NET-1: never routed, and only ever
# configured inside the sandbox's own namespaces).
UNDERLAY = ipaddress.ip_network("192.0.2.0/24")
UNDERLAY_LINK = "underlay"  # the host namespace's side of its underlay veth
VXLAN_PORT = 4789
IFNAME_MAX = 15


def prefix(layout: Layout) -> str:
    digest = hashlib.sha1(str(layout.state_dir).encode()).hexdigest()[:6]
    return f"isthmus-{layout.base_port}-{digest}"


def underlay_namespace(layout: Layout) -> str:
    return f"{prefix(layout)}-underlay"


def host_namespace(layout: Layout, region: str) -> str:
    return f"{prefix(layout)}-host-{region}"


def tunnel_ip(layout: Layout, region: str) -> str:
    """The region's compute host's underlay address: the tunnel IP its agent row reports."""
    return str(UNDERLAY.network_address + layout.regions.index(region) + 1)


def underlay_peer(layout: Layout, region: str) -> str:
    """The underlay namespace's side of a host's veth."""
    return f"host{layout.regions.index(region) + 1}"


class Namespaces(enum.StrEnum):
    """A region's namespaces of one kind of object, each named by the object's id."""

    SERVERS = "vm"
    ROUTERS = "rt"
    OUTSIDES = "out"  # each plays the upstream router of an external network


def namespace_prefix(layout: Layout, region: str, kind: Namespaces) -> str:
    return f"{prefix(layout)}-{kind}-{region}-"


def object_namespace(ns_prefix: str, object_id: str) -> str:
    return f"{ns_prefix}{object_id}"


def _link(head: str, object_id: str) -> str:
    # Neutron's agents keep 11 characters of the id: with a 3-4 character head
    # that fits the kernel's 15.
    return head + object_id[:11]


def bridge(network_id: str) -> str:
    return _link("brq", network_id)


def vxlan(vni: int) -> str:
    return f"vxlan-{vni}"


def tap(port_id: str) -> str:
    return _link("tap", port_id)


def router_interface(port_id: str, gateway: bool) -> str:
    """A router port's end inside the router namespace (Neutron's L3 agent: qr-/qg-)."""
    return _link("qg-" if gateway else "qr-", port_id)


def outside_link(network_id: str) -> str:
    """The host namespace's end of an outside namespace's veth."""
    return _link("out", network_id)


OUTSIDE_INTERFACE = "eth0"
NAT_TABLE = "isthmus"  # the nftables table (family ip) of a router namespace
