"""SANDBOX ONLY: the dataplane agent of one region's compute host.

``python -m isthmus.sandbox.dataplane.agent CONFIG.json``. Every ``interval``
seconds it reads the region's Neutron REST API (ports bound to its host, every
port of their networks, shadows included, the networks' segments and subnets, and
the OVS agent rows, shadow agents included) and makes the host namespace and the
server namespaces match (``wiring`` says what, ``reconcile`` how). It is level-
triggered: whatever changed, by Neutron or by hand, the next pass repairs. When
Neutron cannot be read, nothing is changed (an outage is never read as "gone").
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from isthmus.clients.neutron import NeutronClient, Rejected, Unavailable
from isthmus.sandbox.dataplane import kernel, names, reconcile, router_reconcile, routers, wakeup, wiring

LOG = logging.getLogger("isthmus.sandbox.dataplane")
PORT_FIELDS = ["id", "network_id", "mac_address", "fixed_ips", "device_id", "device_owner",
               "binding:host_id", "binding:vif_type"]
ROUTER_FIELDS = ["id", "routes", "external_gateway_info"]
OVS_AGENT = "Open vSwitch agent"
# Routers are read back from the kernel (addresses, routes, NAT) when their
# wanted state changed, a veth vanished, or every this many passes (hand drift).
FULL_CHECK_EVERY = 30


@dataclass(frozen=True)
class AgentConfig:
    region: str
    host: str  # the compute host whose ports this agent wires
    local_ip: str  # the host's underlay (tunnel) address
    host_namespace: str
    server_namespace_prefix: str
    router_namespace_prefix: str
    outside_namespace_prefix: str
    auth_url: str
    username: str
    password: str
    project_name: str
    interval: float = 1.0  # between passes when no wake-up socket is configured
    timeout: float = 10.0  # every Neutron and Keystone request
    # Neutron (the sandbox binder) wakes the agent on every change through this
    # socket (wakeup.py); a pass also runs every ``resync`` seconds as a backstop.
    wakeup_socket: str = ""
    resync: float = 10.0
    # Woken passes start at least this far apart: a burst of changes (a test
    # booting servers, a campaign) is read in one pass a second, not one pass per
    # change (each pass is a dozen Neutron lists; the region's neutron-server was
    # spending half its requests on them).
    min_gap: float = 1.0
    # An ML2/OVN region (sandbox --ovn): argv prefixes of ovs-vsctl (on the
    # chassis' database) and ethtool. Servers are plugged into br-int and OVN
    # does the rest (L2 across regions, routers): no bridges, VXLAN or routers here.
    ovs_vsctl: list[str] = field(default_factory=list)
    ethtool: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> AgentConfig:
        return cls(**json.loads(Path(path).read_text()))

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.__dict__, indent=2) + "\n")
        return path


def neutron_client(config: AgentConfig) -> NeutronClient:
    from keystoneauth1 import adapter, session
    from keystoneauth1.identity import v3

    auth = v3.Password(auth_url=config.auth_url, username=config.username, password=config.password,
                       project_name=config.project_name, user_domain_name="Default", project_domain_name="Default")
    http = adapter.Adapter(session.Session(auth=auth, timeout=config.timeout), service_type="network",
                           interface=["internal", "public"], region_name=config.region, user_agent="isthmus-dataplane")
    return NeutronClient(http, config.region, config.timeout)


@dataclass(frozen=True)
class Reading:
    """One pass's answers from Neutron, planned."""

    wiring: wiring.HostWiring
    unbound_router_ports: list[str]  # for this host to bind, as an L3 agent does
    floatingip_bindings: list[routers.FloatingIpBinding] = field(default_factory=list)


def read_wiring(neutron: NeutronClient, config: AgentConfig) -> Reading:
    """What Neutron says this host should carry (raises Unavailable/Rejected)."""
    bound_here = neutron.list("ports", **{"binding:host_id": config.host, "fields": PORT_FIELDS})
    if config.ovs_vsctl:
        return _read_ovn_servers(neutron, config, bound_here)
    server_nets = {p["network_id"] for p in wiring.local_server_ports(config.host, bound_here)}
    # The region has one host: every router of the region is this agent's (as
    # if the L3 scheduler had put them all on it), every project's (admin).
    router_rows = neutron.list("routers", fields=ROUTER_FIELDS)
    router_ports = routers.router_ports(router_rows, neutron.list(
        "ports", device_owner=list(routers.ROUTER_OWNERS), fields=PORT_FIELDS)) if router_rows else []
    externals = neutron.list("networks", **{"router:external": True, "fields": ["id", "router:external"]})
    router_nets = {p["network_id"] for p in router_ports}
    network_ids = sorted(server_nets | router_nets | {n["id"] for n in externals})
    if not network_ids:
        return Reading(wiring.HostWiring(), routers.ports_to_bind(router_ports))
    networks = neutron.list("networks", id=network_ids)
    subnets = neutron.list("subnets", network_id=network_ids)
    outside_nets = routers.external_networks(externals, subnets)
    floatingips = neutron.list("floatingips", router_id=[r["id"] for r in router_rows]) if router_rows else []
    host = wiring.plan_host(
        config.host, config.local_ip,
        ports=neutron.list("ports", network_id=network_ids, fields=PORT_FIELDS),
        networks=networks, subnets=subnets, agents=neutron.list("agents", agent_type=OVS_AGENT),
        extra_networks=router_nets | set(outside_nets))
    host = replace(host, routers=routers.plan_routers(router_rows, router_ports, floatingips, networks, subnets),
                   outsides=routers.plan_outsides(outside_nets, networks, subnets))
    fip_ports = neutron.list("ports", device_owner=routers.FLOATINGIP_OWNER, fields=PORT_FIELDS)
    return Reading(host, routers.ports_to_bind(router_ports),
                   routers.floatingip_bindings(floatingips, fip_ports, config.host))


def _read_ovn_servers(neutron: NeutronClient, config: AgentConfig, bound_here: list[dict]) -> Reading:
    """An OVN host only plugs its servers: their ports, networks (MTU) and subnets."""
    server_nets = sorted({p["network_id"] for p in wiring.local_server_ports(config.host, bound_here)})
    if not server_nets:
        return Reading(wiring.HostWiring(), [])
    networks = neutron.list("networks", id=server_nets)
    subnets = neutron.list("subnets", network_id=server_nets)
    planned = wiring.plan_host(config.host, config.local_ip, ports=bound_here, networks=networks, subnets=subnets,
                               agents=[])
    return Reading(wiring.HostWiring(servers=planned.servers), [])


def settle_delay(began: float, now: float, min_gap: float) -> float:
    """How long a woken agent waits before its next pass: none after a quiet
    spell (a lone change is served at once), the rest of ``min_gap`` otherwise."""
    return max(0.0, began + min_gap - now)


class Agent:
    def __init__(self, config: AgentConfig, neutron: NeutronClient) -> None:
        self.config = config
        self.neutron = neutron
        # Servers and routers wired as wanted by an earlier pass; one whose wanted
        # wiring changed, or whose veth vanished, is read back and fixed.
        self.applied: dict[str, wiring.Server] = {}
        self.applied_routers: dict[str, routers.Router] = {}
        # router id -> (the ruleset loaded, how ``nft list`` printed it back):
        # a listing that differs from what was loaded only in nft's own spelling
        # is not reloaded every pass.
        self.nat_loaded: dict[str, tuple[str | None, str]] = {}
        self.passes = 0
        self.ovs = reconcile.OvsPlug(tuple(config.ovs_vsctl), tuple(config.ethtool)) if config.ovs_vsctl else None

    def run_forever(self) -> None:
        LOG.info("dataplane agent of %s (host %s, %s) started", self.config.region, self.config.host,
                 self.config.local_ip)
        listener = wakeup.Listener(Path(self.config.wakeup_socket)) if self.config.wakeup_socket else None
        while True:
            began = time.monotonic()
            if listener is not None:
                listener.drain()  # what arrived before this pass, this pass reads
            self.run_once()
            if listener is not None:
                if listener.wait(self.config.resync):  # at once if a change came during the pass
                    time.sleep(settle_delay(began, time.monotonic(), self.config.min_gap))
            else:
                time.sleep(max(0.0, self.config.interval - (time.monotonic() - began)))

    def run_once(self) -> bool:
        """One pass; False when Neutron could not be read (nothing was changed)."""
        try:
            reading = read_wiring(self.neutron, self.config)
        except (Unavailable, Rejected) as err:
            LOG.warning("Neutron not read, nothing changed: %s", err)
            return False
        self._bind(reading.unbound_router_ports)
        self.passes += 1
        try:
            self._apply(reading.wiring, full_check=self.passes % FULL_CHECK_EVERY == 1)
        except kernel.KernelError as err:  # reading the kernel failed: try again next pass
            LOG.warning("%s", err)
        self._bind_floatingips(reading.floatingip_bindings)
        return True

    def _bind_floatingips(self, bindings: list[routers.FloatingIpBinding]) -> None:
        """A floating IP is wired once its router's NAT is loaded: bind its port
        here then (as the L3 agent reports it ACTIVE), unbind it once it is not."""
        for item in bindings:
            if item.bind and item.router_id not in self.applied_routers:
                continue  # not wired yet: a later pass binds it
            try:
                self.neutron.update("ports", item.port_id, {"binding:host_id": self.config.host if item.bind else ""})
                LOG.info("floating IP port %s %s", item.port_id, "bound" if item.bind else "unbound")
            except (Unavailable, Rejected) as err:
                LOG.warning("floating IP port %s not %s: %s", item.port_id, "bound" if item.bind else "unbound", err)

    def _bind(self, port_ids: list[str]) -> None:
        """Bind router ports to this host, as the L3 agent hosting the router
        does: ML2 then binds them and the region reports a transit port to central."""
        for port_id in port_ids:
            try:
                self.neutron.update("ports", port_id, {"binding:host_id": self.config.host})
                LOG.info("router port %s bound to %s", port_id, self.config.host)
            except (Unavailable, Rejected) as err:
                LOG.warning("router port %s not bound: %s", port_id, err)

    def _apply(self, wanted: wiring.HostWiring, full_check: bool = False) -> None:
        host_ns, prefix = self.config.host_namespace, self.config.server_namespace_prefix
        state = kernel.read_host(host_ns)
        cmds = [] if self.ovs else reconcile.network_commands(host_ns, self.config.local_ip, wanted, state)
        if cmds:
            self._run(cmds, "networks")
            state = kernel.read_host(host_ns)
        present = kernel.namespaces()
        existing = {ns for ns in present if ns.startswith(prefix)}
        changed = False
        for server in wanted.servers.values():
            ns = names.object_namespace(prefix, server.server_id)
            taps_present = all(names.tap(v.port_id) in state.links for v in server.vifs)
            if self.applied.get(server.server_id) == server and ns in existing and taps_present:
                continue
            interfaces = kernel.read_server(ns) if ns in existing else None
            routes = kernel.default_routes(ns) if ns in existing else set()
            cmds = reconcile.server_commands(host_ns, ns, server, interfaces, routes, state, self.ovs)
            changed = changed or bool(cmds)
            if self._run(cmds, f"server {server.server_id}"):
                self.applied[server.server_id] = server
            else:
                self.applied.pop(server.server_id, None)
        changed = self._apply_routers(wanted, state, present, full_check) or changed
        changed = self._apply_outsides(wanted, state, present, full_check) or changed
        if changed:
            state = kernel.read_host(host_ns)
            present = kernel.namespaces()
            existing = {ns for ns in present if ns.startswith(prefix)}
        self._run(reconcile.removal_commands(host_ns, wanted, state, existing, prefix, self.ovs), "removals")
        self._remove_l3_namespaces(wanted, present)
        for gone in set(self.applied) - set(wanted.servers):
            del self.applied[gone]

    def _apply_routers(self, wanted: wiring.HostWiring, state: kernel.HostState, present: set[str],
                       full_check: bool) -> bool:
        """Each router's namespace, interfaces, routes and NAT; True if anything ran."""
        changed = False
        for router in wanted.routers.values():
            ns = names.object_namespace(self.config.router_namespace_prefix, router.router_id)
            veths = all(names.tap(p.port_id) in state.links for p in router.ports)
            if self.applied_routers.get(router.router_id) == router and ns in present and veths and not full_check:
                continue
            current = kernel.read_router(ns, names.NAT_TABLE) if ns in present else None
            what = f"router {router.router_id}"
            cmds = router_reconcile.router_link_commands(self.config.host_namespace, ns, router, current, state)
            ok = self._run(cmds, what)
            routes = router_reconcile.router_route_commands(ns, router, current.routes if current else frozenset())
            ok = all([self._run([cmd], what) for cmd in routes]) and ok  # each route on its own
            ok = self._apply_nat(ns, router, current.nat if current else "") and ok
            changed = changed or bool(cmds or routes)
            if ok:
                self.applied_routers[router.router_id] = router
            else:
                self.applied_routers.pop(router.router_id, None)
        for gone in set(self.applied_routers) - set(wanted.routers):
            del self.applied_routers[gone]
            self.nat_loaded.pop(gone, None)
        return changed

    def _apply_nat(self, ns: str, router: routers.Router, listed: str) -> bool:
        ruleset = routers.nat_ruleset(router)
        if listed == (ruleset or "") or self.nat_loaded.get(router.router_id) == (ruleset, listed):
            return True
        try:
            kernel.load_nat(ns, names.NAT_TABLE, ruleset)
            self.nat_loaded[router.router_id] = (ruleset, kernel.read_nat(ns, names.NAT_TABLE))
        except kernel.KernelError as err:
            LOG.warning("router %s NAT: %s", router.router_id, err)
            return False
        LOG.info("router %s: NAT %s", router.router_id, "loaded" if ruleset else "removed")
        return True

    def _apply_outsides(self, wanted: wiring.HostWiring, state: kernel.HostState, present: set[str],
                        full_check: bool) -> bool:
        changed = False
        for outside in wanted.outsides.values():
            ns = names.object_namespace(self.config.outside_namespace_prefix, outside.network_id)
            if ns in present and names.outside_link(outside.network_id) in state.links and not full_check:
                continue
            interfaces = kernel.read_server(ns) if ns in present else None
            cmds = router_reconcile.outside_commands(self.config.host_namespace, ns, outside, interfaces, state)
            changed = changed or bool(cmds)
            self._run(cmds, f"outside {outside.network_id}")
        return changed

    def _remove_l3_namespaces(self, wanted: wiring.HostWiring, present: set[str]) -> None:
        rprefix, oprefix = self.config.router_namespace_prefix, self.config.outside_namespace_prefix
        want = {names.object_namespace(rprefix, r) for r in wanted.routers}
        want |= {names.object_namespace(oprefix, n) for n in wanted.outsides}
        mine = {ns for ns in present if ns.startswith((rprefix, oprefix))}
        self._run(router_reconcile.namespace_removals(want, mine), "router removals")

    @staticmethod
    def _run(cmds: list[kernel.Command], what: str) -> bool:
        """Run in order; stop at the first failure (the next pass starts from what is there)."""
        for cmd in cmds:
            try:
                kernel.run(cmd)
            except kernel.KernelError as err:
                LOG.warning("%s: %s", what, err)
                return False
            LOG.info("%s", " ".join(cmd))
        return True


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m isthmus.sandbox.dataplane.agent CONFIG.json", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config = AgentConfig.load(Path(argv[0]))
    Agent(config, neutron_client(config)).run_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
