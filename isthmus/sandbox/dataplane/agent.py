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
from dataclasses import dataclass
from pathlib import Path

from isthmus.clients.neutron import NeutronClient, Rejected, Unavailable
from isthmus.sandbox.dataplane import kernel, names, reconcile, wakeup, wiring

LOG = logging.getLogger("isthmus.sandbox.dataplane")
PORT_FIELDS = ["id", "network_id", "mac_address", "fixed_ips", "device_id", "device_owner",
               "binding:host_id", "binding:vif_type"]
OVS_AGENT = "Open vSwitch agent"


@dataclass(frozen=True)
class AgentConfig:
    region: str
    host: str  # the compute host whose ports this agent wires
    local_ip: str  # the host's underlay (tunnel) address
    host_namespace: str
    server_namespace_prefix: str
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

    @classmethod
    def load(cls, path: Path) -> "AgentConfig":
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


def read_wiring(neutron: NeutronClient, config: AgentConfig) -> wiring.HostWiring:
    """What Neutron says this host should carry (raises Unavailable/Rejected)."""
    bound_here = neutron.list("ports", **{"binding:host_id": config.host, "fields": PORT_FIELDS})
    network_ids = sorted({p["network_id"] for p in wiring.local_server_ports(config.host, bound_here)})
    if not network_ids:
        return wiring.HostWiring()
    return wiring.plan_host(
        config.host, config.local_ip,
        ports=neutron.list("ports", network_id=network_ids, fields=PORT_FIELDS),
        networks=neutron.list("networks", id=network_ids),
        subnets=neutron.list("subnets", network_id=network_ids),
        agents=neutron.list("agents", agent_type=OVS_AGENT))


class Agent:
    def __init__(self, config: AgentConfig, neutron: NeutronClient) -> None:
        self.config = config
        self.neutron = neutron
        # Servers wired as wanted by an earlier pass; a server whose wanted
        # wiring changed, or whose tap vanished, is read back and fixed.
        self.applied: dict[str, wiring.Server] = {}

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
                listener.wait(self.config.resync)  # at once if a change came during the pass
            else:
                time.sleep(max(0.0, self.config.interval - (time.monotonic() - began)))

    def run_once(self) -> bool:
        """One pass; False when Neutron could not be read (nothing was changed)."""
        try:
            wanted = read_wiring(self.neutron, self.config)
        except (Unavailable, Rejected) as err:
            LOG.warning("Neutron not read, nothing changed: %s", err)
            return False
        try:
            self._apply(wanted)
        except kernel.KernelError as err:  # reading the kernel failed: try again next pass
            LOG.warning("%s", err)
        return True

    def _apply(self, wanted: wiring.HostWiring) -> None:
        host_ns, prefix = self.config.host_namespace, self.config.server_namespace_prefix
        state = kernel.read_host(host_ns)
        cmds = reconcile.network_commands(host_ns, self.config.local_ip, wanted, state)
        if cmds:
            self._run(cmds, "networks")
            state = kernel.read_host(host_ns)
        existing = {ns for ns in kernel.namespaces() if ns.startswith(prefix)}
        changed = False
        for server in wanted.servers.values():
            ns = names.server_namespace(prefix, server.server_id)
            taps_present = all(names.tap(v.port_id) in state.links for v in server.vifs)
            if self.applied.get(server.server_id) == server and ns in existing and taps_present:
                continue
            interfaces = kernel.read_server(ns) if ns in existing else None
            routes = kernel.default_routes(ns) if ns in existing else set()
            cmds = reconcile.server_commands(host_ns, ns, server, interfaces, routes, state)
            changed = changed or bool(cmds)
            if self._run(cmds, f"server {server.server_id}"):
                self.applied[server.server_id] = server
            else:
                self.applied.pop(server.server_id, None)
        if changed:
            state = kernel.read_host(host_ns)
            existing = {ns for ns in kernel.namespaces() if ns.startswith(prefix)}
        self._run(reconcile.removal_commands(host_ns, wanted, state, existing, prefix), "removals")
        for gone in set(self.applied) - set(wanted.servers):
            del self.applied[gone]

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
