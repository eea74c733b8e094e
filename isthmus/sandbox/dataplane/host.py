"""Setting up and tearing down a sandbox's dataplane: the underlay, one host
namespace per region, the agents; and ``sandbox exec`` into a server.

The underlay is a namespace holding one bridge; each region's host namespace
reaches it through a veth and has the address its agent row reports as tunnel IP.
Nothing is created in the machine's own network namespace except namespaces.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from isthmus.sandbox import process, runtime
from isthmus.sandbox.dataplane import kernel, names, wakeup
from isthmus.sandbox.dataplane.agent import AgentConfig
from isthmus.sandbox.layout import PASSWORD, Layout

UNDERLAY_BRIDGE = "underlay"
# Bits of /proc/self/status CapEff: links need NET_ADMIN, `ip netns add` mounts (SYS_ADMIN).
CAP_NET_ADMIN = 12
CAP_SYS_ADMIN = 21
TOOLS = {"ip": "iproute2", "bridge": "iproute2", "ping": "iputils-ping", "nft": "nftables"}  # nft: routers' NAT


def effective_capabilities() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def preflight_problem(capabilities: int, which=shutil.which) -> str | None:
    """Why this machine cannot run ``--dataplane``, in one line; None if it can."""
    missing_caps = [name for bit, name in ((CAP_NET_ADMIN, "CAP_NET_ADMIN"), (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"))
                    if not capabilities >> bit & 1]
    if missing_caps:
        return (f"--dataplane needs {' and '.join(missing_caps)} (network namespaces, bridges, VXLAN): "
                "run as root, or without --dataplane")
    missing = sorted({pkg for tool, pkg in TOOLS.items() if which(tool) is None})
    if missing:
        return f"--dataplane needs the OS packages {', '.join(missing)} (run tools/setup.sh as root)"
    return None


def check_machine() -> None:
    problem = preflight_problem(effective_capabilities())
    if problem:
        raise process.SandboxError(problem)


def own_namespaces(layout: Layout) -> list[str]:
    """This sandbox's namespaces (servers first, the underlay last)."""
    mine = [ns for ns in kernel.namespaces() if ns.startswith(names.prefix(layout) + "-")]
    return sorted(mine, key=lambda ns: (ns == names.underlay_namespace(layout), "-host-" in ns, ns))


def remove(layout: Layout) -> list[str]:
    """Delete every namespace of this sandbox (their links and bridges go with them)."""
    removed = []
    for ns in own_namespaces(layout):
        kernel.delete_namespace(ns)
        removed.append(ns)
    return removed


def create_hosts(layout: Layout) -> None:
    """The underlay namespace and bridge, and a host namespace per region with its
    underlay address. Leftovers of this same sandbox (a crash) are removed first."""
    remove(layout)
    underlay = names.underlay_namespace(layout)
    try:
        kernel.add_namespace(underlay)
        kernel.run(["ip", "-n", underlay, "link", "add", "name", UNDERLAY_BRIDGE, "type", "bridge"])
        kernel.run(["ip", "-n", underlay, "link", "set", UNDERLAY_BRIDGE, "up"])
        for region in layout.regions:
            host, peer = names.host_namespace(layout, region), names.underlay_peer(layout, region)
            kernel.add_namespace(host)
            kernel.run(["ip", "-n", host, "link", "add", "name", names.UNDERLAY_LINK, "type", "veth",
                        "peer", "name", peer, "netns", underlay])
            kernel.run(["ip", "-n", underlay, "link", "set", peer, "master", UNDERLAY_BRIDGE, "up"])
            kernel.run(["ip", "-n", host, "addr", "add",
                        f"{names.tunnel_ip(layout, region)}/{names.UNDERLAY.prefixlen}", "dev", names.UNDERLAY_LINK])
            kernel.run(["ip", "-n", host, "link", "set", names.UNDERLAY_LINK, "up"])
        # Fail here, in one line, where the kernel has no VXLAN (not later in an agent log).
        probe = names.host_namespace(layout, layout.regions[0])
        kernel.run(["ip", "-n", probe, "link", "add", "name", "vxlan-probe", "type", "vxlan", "id", "1",
                    "dstport", str(names.VXLAN_PORT), "dev", names.UNDERLAY_LINK])
        kernel.run(["ip", "-n", probe, "link", "del", "vxlan-probe"])
    except kernel.KernelError as err:
        raise process.SandboxError(f"dataplane setup failed: {err}") from err


def agent_config(layout: Layout, region: str) -> AgentConfig:
    from isthmus.sandbox import ovn
    from isthmus.sandbox.nova import compute_host

    ovn_region = layout.is_ovn(region)
    return AgentConfig(
        region=region, host=compute_host(region), local_ip=names.tunnel_ip(layout, region),
        host_namespace=names.host_namespace(layout, region),
        server_namespace_prefix=names.namespace_prefix(layout, region, names.Namespaces.SERVERS),
        router_namespace_prefix=names.namespace_prefix(layout, region, names.Namespaces.ROUTERS),
        outside_namespace_prefix=names.namespace_prefix(layout, region, names.Namespaces.OUTSIDES),
        auth_url=layout.auth_url, username="isthmus", password=PASSWORD, project_name="service",
        wakeup_socket=str(wakeup_socket(layout, region)),
        ovs_vsctl=ovn.vsctl(layout, region) if ovn_region else [], ethtool=ovn.ethtool(layout) if ovn_region else [])


def wakeup_socket(layout: Layout, region: str) -> Path:
    """Where the region's agent listens for Neutron's "changed" (wakeup.py)."""
    return wakeup.socket_path(layout.data / "dataplane", region)


def agent_name(region: str) -> str:
    return f"dataplane-{region}"


def start_agent(layout: Layout, region: str) -> process.ServiceRecord:
    path = agent_config(layout, region).save(layout.etc / "dataplane" / f"{region}.json")
    return runtime.start_daemon(layout, agent_name(region),
                                [sys.executable, "-m", "isthmus.sandbox.dataplane.agent", str(path)])


def server_namespace(layout: Layout, server_id: str) -> str | None:
    """The namespace of a server (any region), if its agent has made it."""
    found = _present_namespaces(layout, names.Namespaces.SERVERS, {server_id})
    return found[0] if found else None


def resolve_server(layout: Layout, server: str) -> str:
    """A server's id from its id or name (any region, any project)."""
    if not layout.dataplane:
        raise process.SandboxError("this sandbox runs without --dataplane: servers have no namespaces")
    if server_namespace(layout, server):
        return server
    from isthmus.sandbox import keystone

    found = []
    for region in layout.regions:
        conn = keystone.admin_connection(layout, region)
        found += [(s.id, region) for s in conn.compute.servers(all_projects=True) if server in (s.id, s.name)]
    if not found:
        raise process.SandboxError(f"no server {server!r} in {', '.join(layout.regions)}")
    if len(found) > 1:
        raise process.SandboxError(f"{len(found)} servers are named {server!r} "
                                   f"({', '.join(f'{i} in {r}' for i, r in found)}): give an id")
    server_id, region = found[0]
    if server_namespace(layout, server_id) is None:
        raise process.SandboxError(f"server {server!r} ({server_id}) has no namespace yet: its agent makes it once "
                                   f"the port is bound; see: isthmus sandbox logs {agent_name(region)}")
    return server_id


def outside_namespace(layout: Layout, network: str) -> str:
    """The outside namespace (the upstream router) of an external network, by
    name or id, in whichever region's agent made it."""
    if not layout.dataplane:
        raise process.SandboxError("this sandbox runs without --dataplane: there is no outside namespace")
    ids = {network}
    if not _outside_namespaces(layout, ids):
        from isthmus.sandbox import keystone
        from isthmus.sandbox.layout import CENTRAL_REGION

        conn = keystone.admin_connection(layout, CENTRAL_REGION)
        ids = {n.id for n in conn.network.networks(name=network, is_router_external=True)}
    found = _outside_namespaces(layout, ids)
    if not found:
        raise process.SandboxError(f"no outside namespace for external network {network!r}: its region's agent "
                                   "makes one once the network has a subnet")
    if len(found) > 1:
        raise process.SandboxError(f"{len(found)} outside namespaces match {network!r}: give the network's id")
    return found[0]


def _outside_namespaces(layout: Layout, network_ids: set[str]) -> list[str]:
    return sorted(_present_namespaces(layout, names.Namespaces.OUTSIDES, network_ids))


def _present_namespaces(layout: Layout, kind: names.Namespaces, object_ids: set[str]) -> list[str]:
    """The namespaces the agents have made for these objects, in the layout's region order."""
    present = kernel.namespaces()
    return [ns for region in layout.regions for object_id in object_ids
            if (ns := names.object_namespace(names.namespace_prefix(layout, region, kind), object_id)) in present]


def ping(namespace: str, address: str, wait: float = 1.0) -> bool:
    """One echo request from the namespace, answered within ``wait`` seconds."""
    try:
        return subprocess.run(["ip", "netns", "exec", namespace, "ping", "-c", "1", "-W", str(wait), address],
                              capture_output=True, timeout=10).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def exec_in(namespace: str | None, command: list[str]) -> int:
    if namespace is None:
        raise process.SandboxError("the server's namespace is gone")
    return subprocess.run(["ip", "netns", "exec", namespace, *command]).returncode
