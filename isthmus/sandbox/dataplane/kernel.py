"""The few ``ip``/``bridge`` commands the dataplane needs, each bounded by a timeout.

Commands are argv lists (never a shell) so that what the reconciler plans can be
compared in tests before anything runs.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from dataclasses import dataclass, field

COMMAND_TIMEOUT = 10.0
ZERO_MAC = "00:00:00:00:00:00"  # a VXLAN device's default entry: where broadcasts are flooded


class KernelError(RuntimeError):
    """An ``ip``/``bridge`` command failed; carries its argv and stderr."""


Command = list[str]


def run(argv: Command, timeout: float = COMMAND_TIMEOUT) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as err:
        raise KernelError(f"{' '.join(argv)}: no answer in {timeout:.0f}s") from err
    if result.returncode != 0:
        raise KernelError(f"{' '.join(argv)}: {result.stderr.strip() or f'exit {result.returncode}'}")
    return result.stdout


def run_json(argv: Command) -> list[dict]:
    text = run(argv).strip()
    return json.loads(text) if text else []


def namespaces() -> set[str]:
    """Names of the machine's named network namespaces."""
    return {entry["name"] for entry in run_json(["ip", "-j", "netns", "list"])}


def add_namespace(name: str) -> None:
    run(["ip", "netns", "add", name])
    run(["ip", "-n", name, "link", "set", "lo", "up"])


def delete_namespace(name: str) -> None:
    """Links inside go with it (a veth takes its peer in the other namespace along)."""
    run(["ip", "netns", "delete", name])


@dataclass(frozen=True)
class Link:
    name: str
    kind: str  # "bridge", "vxlan", "veth", ...
    master: str | None = None
    vni: int | None = None
    mtu: int = 0


@dataclass
class HostState:
    """What a host namespace holds now, as the reconciler compares it."""

    links: dict[str, Link] = field(default_factory=dict)
    fdb: set[tuple[str, str, str]] = field(default_factory=set)  # (vxlan device, MAC, tunnel IP)
    neighbours: set[tuple[str, str, str]] = field(default_factory=set)  # (vxlan device, IP, MAC)


def read_host(namespace: str) -> HostState:
    state = HostState()
    for link in run_json(["ip", "-n", namespace, "-j", "-d", "link", "show"]):
        info = link.get("linkinfo") or {}
        state.links[link["ifname"]] = Link(
            name=link["ifname"], kind=info.get("info_kind", ""), master=link.get("master"),
            vni=(info.get("info_data") or {}).get("id") if info.get("info_kind") == "vxlan" else None,
            mtu=int(link.get("mtu") or 0))
    vxlans = {n for n, link in state.links.items() if link.kind == "vxlan"}
    for entry in run_json(["bridge", "-n", namespace, "-j", "fdb", "show"]):
        if entry.get("ifname") in vxlans and entry.get("dst") and "self" in entry.get("flags", []):
            state.fdb.add((entry["ifname"], entry["mac"].lower(), entry["dst"]))
    for entry in run_json(["ip", "-n", namespace, "-j", "neigh", "show", "nud", "permanent"]):
        if entry.get("dev") in vxlans and entry.get("lladdr"):
            state.neighbours.add((entry["dev"], entry["dst"], entry["lladdr"].lower()))
    return state


@dataclass(frozen=True)
class ServerInterface:
    name: str
    port_id: str  # the interface's alias: which port it stands for
    mac: str
    mtu: int
    addresses: tuple[str, ...]


def read_server(namespace: str) -> list[ServerInterface]:
    # `ip -j addr` leaves the alias out (iproute2 6.1): it comes from `ip -j link`.
    links = run_json(["ip", "-n", namespace, "-j", "link", "show"])
    aliases = {link["ifname"]: link.get("ifalias", "") for link in links}
    found = []
    for link in run_json(["ip", "-n", namespace, "-j", "addr", "show"]):
        if link.get("link_type") == "loopback":
            continue
        found.append(ServerInterface(
            name=link["ifname"], port_id=link.get("ifalias") or aliases.get(link["ifname"], ""),
            mac=link.get("address", "").lower(),
            mtu=int(link.get("mtu") or 0),
            addresses=tuple(f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", [])
                            if a.get("scope") == "global")))
    return found


def default_routes(namespace: str) -> set[str]:
    """Gateways of the namespace's default routes (IPv4 and IPv6)."""
    gateways = set()
    for family in ("-4", "-6"):
        for route in run_json(["ip", "-n", namespace, family, "-j", "route", "show", "default"]):
            if route.get("gateway"):
                gateways.add(route["gateway"])
    return gateways


FORWARDING = ("net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding")


@dataclass(frozen=True)
class RouterState:
    """What a router namespace holds now."""

    interfaces: tuple[ServerInterface, ...]
    routes: frozenset[tuple[str, str]]  # (destination, nexthop) of the routes the agent adds (proto static)
    forwarding: bool
    nat: str  # ``nft list table`` of the agent's table; "" when there is none


def read_router(namespace: str, nat_table: str) -> RouterState:
    routes = set()
    for family in ("-4", "-6"):
        for route in run_json(["ip", "-n", namespace, family, "-j", "route", "show", "proto", "static"]):
            if route.get("gateway"):
                routes.add((_destination(route["dst"], family), route["gateway"]))
    values = run(["ip", "netns", "exec", namespace, "sysctl", "-n", *FORWARDING]).split()
    return RouterState(tuple(read_server(namespace)), frozenset(routes), values == ["1"] * len(FORWARDING),
                       read_nat(namespace, nat_table))


def _destination(dst: str, family: str) -> str:
    if dst == "default":
        return "0.0.0.0/0" if family == "-4" else "::/0"
    return ipaddress.ip_network(dst, strict=False).with_prefixlen


def read_nat(namespace: str, table: str) -> str:
    try:
        return run(["ip", "netns", "exec", namespace, "nft", "list", "table", "ip", table]).strip()
    except KernelError as err:
        if "No such file or directory" in str(err):
            return ""
        raise


def load_nat(namespace: str, table: str, ruleset: str | None) -> None:
    """Replace the namespace's NAT table in one nftables transaction (None: remove it)."""
    script = f"table ip {table}\ndelete table ip {table}\n" + (ruleset + "\n" if ruleset else "")
    try:
        result = subprocess.run(["ip", "netns", "exec", namespace, "nft", "-f", "-"], input=script,
                                capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired as err:
        raise KernelError(f"nft -f in {namespace}: no answer in {COMMAND_TIMEOUT:.0f}s") from err
    if result.returncode != 0:
        raise KernelError(f"nft -f in {namespace}: {result.stderr.strip() or f'exit {result.returncode}'}")
