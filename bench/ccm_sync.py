"""Cost of the multi-region CCM against a running sandbox: API calls per node, time for N nodes.

Two tables, each with ratios against a single-region baseline measured in the same run:

1. **Nova/Neutron/Keystone calls per node per sync**, steady state (token and version
   discovery cached; the first call of a fresh client costs one Keystone and a few
   discovery requests more, shown separately). "Sync" is what the node controller does
   per node (``InstanceMetadata``); the lifecycle controller's NotReady check
   (``InstanceExists`` + ``InstanceShutdown``) is listed too.
2. **Time to sync N nodes (default 500)**: the real controllers (``kubernetes.client``
   against a kmock emulator in this process, openstacksdk against the sandbox), one pass
   each of initialisation, lifecycle (every node NotReady) and address re-sync.

Calls are counted on the wire: the keystoneauth session's HTTP transport (its
``requests.Session``) is wrapped to record every request (retries and version discovery
included) and classified by the catalog endpoint it went to. OpenStack is not mocked.

The N Nodes reuse a few real servers (``--servers-per-region``, default 2): node *i* is
``openstack://…/<id of server i mod k>`` in region *i mod 2* (all RegionOne in the
baseline). Node names are unique, so search-by-name is only measured per node (table 1);
the N-node passes use providerIDs, as kubelets set them (``openstack:///ID``) or as
``OS_CCM_REGIONAL`` writes them (``openstack://REGION/ID``).

    .venv/bin/python bench/ccm_sync.py [--state-dir .sandbox] [--nodes 500] [--servers-per-region 2] [--chunk 25]

With 500 nodes it runs about 4,500 Nova/Neutron calls per mode; expect 10-25 minutes on a
busy two-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

REGIONS = ("RegionOne", "RegionTwo")
UNINIT = {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}


# --- counting on the wire ---------------------------------------------------------------------

@dataclass
class CallCounter:
    """Wraps a keystoneauth session's transport; counts requests per (service, region)."""

    session: Any
    where: dict[str, tuple[str, str]] = field(default_factory=dict)  # netloc -> (service, region)
    counts: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        transport = self.session.session  # the requests.Session every keystoneauth request goes through
        send = transport.request

        def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return send(method, url, *args, **kwargs)
            finally:
                with self._lock:
                    self.counts[self.where.get(urlsplit(url).netloc, ("other", ""))] += 1
                    self.seconds += time.perf_counter() - started

        transport.request = request

    def learn_catalog(self) -> None:
        catalog = self.session.auth.get_access(self.session).service_catalog
        auth = urlsplit(self.session.auth.auth_url).netloc
        self.where[auth] = ("identity", "")
        for entry in catalog.catalog:
            for endpoint in entry.get("endpoints", []):
                self.where.setdefault(urlsplit(endpoint["url"]).netloc, (entry["type"], endpoint.get("region_id", "")))

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self.seconds = 0.0

    def by_service(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (service, _), n in self.counts.items():
            out[{"compute": "nova", "network": "neutron", "identity": "keystone"}.get(service, "other")] += n
        return dict(out)


# --- sandbox fleet ----------------------------------------------------------------------------

def sandbox_auth(state_dir: Path) -> dict[str, str]:
    return yaml.safe_load((state_dir / "clouds.yaml").read_text())["clouds"]["isthmus-demo"]["auth"]


def connect(state_dir: Path, region: str) -> Any:
    import openstack.config

    config = openstack.config.OpenStackConfig(config_files=[str(state_dir / "clouds.yaml")])
    return openstack.connection.Connection(config=config.get_one(cloud="isthmus-demo", region_name=region))


@contextmanager
def fleet(state_dir: Path, per_region: int) -> Iterator[dict[str, list[str]]]:
    """``per_region`` ACTIVE servers in each region; everything removed afterwards.

    One network in CentralRegion with Isthmus networking (the sandbox default), one per
    region on a ``--plain`` sandbox.
    """
    from isthmus.sandbox.layout import CENTRAL_REGION, Layout

    layout = Layout.load(state_dir)
    plain = bool(layout and layout.plain)
    tag = f"bench-ccm-{uuid.uuid4().hex[:6]}"
    networks: list[tuple[str, str]] = []  # (region it was created in, id)
    servers: dict[str, list[str]] = {region: [] for region in REGIONS}
    try:
        for index, region in enumerate(REGIONS if plain else (CENTRAL_REGION,)):
            conn = connect(state_dir, region)
            net = conn.network.create_network(name=tag)
            networks.append((region, net.id))
            conn.network.create_subnet(network_id=net.id, ip_version=4, cidr=f"10.{170 + index}.0.0/24")
        booted = []
        for index, region in enumerate(REGIONS):
            conn = connect(state_dir, region)
            net_id = networks[index if plain else 0][1]
            image = conn.image.find_image("tiny", ignore_missing=False)
            flavor = conn.compute.find_flavor("m1.tiny", ignore_missing=False)
            for i in range(per_region):
                server = conn.compute.create_server(name=f"{tag}-{region}-{i}", image_id=image.id,
                                                    flavor_id=flavor.id, networks=[{"uuid": net_id}])
                servers[region].append(server.id)
                booted.append((conn, server))
        for conn, server in booted:
            conn.compute.wait_for_server(server, wait=300)
        yield servers
    finally:
        for region, ids in servers.items():
            conn = connect(state_dir, region)
            for server_id in ids:
                conn.compute.delete_server(server_id, ignore_missing=True)
            for server_id in ids:
                server = conn.compute.find_server(server_id, ignore_missing=True)
                if server is not None:
                    conn.compute.wait_for_delete(server, wait=180)
        for region, net_id in networks:
            conn = connect(state_dir, region)
            for port in conn.network.ports(network_id=net_id):
                if not (port.device_owner or "").startswith("network:"):
                    conn.network.delete_port(port, ignore_missing=True)
            for attempt in range(60):  # ports of deleted servers may still be going
                try:
                    conn.network.delete_network(net_id, ignore_missing=True)
                    break
                except Exception:  # noqa: BLE001 - retried; the last attempt reports
                    if attempt == 59:
                        raise
                    time.sleep(1)


def cloud_conf(state_dir: Path, regions: tuple[str, ...]) -> str:
    auth = sandbox_auth(state_dir)
    lines = ["[Global]", f"auth-url = {auth['auth_url']}", f"username = {auth['username']}",
             f'password = "{auth["password"]}"', f"tenant-name = {auth['project_name']}", "domain-name = Default",
             f"region = {regions[0]}", *[f"regions = {r}" for r in regions]]
    return "\n".join(lines) + "\n"


def make_instances(state_dir: Path, regions: tuple[str, ...], regional: bool = True) -> tuple[Any, CallCounter]:
    """What isthmus-ccm builds at startup, with the counter on its one session."""
    from isthmus.ccm.config import parse_config
    from isthmus.ccm.openstack.clients import OpenStackClients
    from isthmus.ccm.openstack.instances import Instances

    config = parse_config(cloud_conf(state_dir, regions), "bench.conf")
    clients = OpenStackClients.from_config(config)
    counter = CallCounter(clients.session)
    counter.learn_catalog()
    return Instances(clients, config.regions, config.networking,
                     environ={"OS_CCM_REGIONAL": "true" if regional else ""}), counter


# --- table 1: calls per node ------------------------------------------------------------------

@dataclass
class Case:
    name: str
    regions: tuple[str, ...]
    node: Callable[[dict[str, list[str]], dict[str, list[str]], int], Any]  # (ids, names, i) -> NodeRef
    op: str = "metadata"  # or "notready"


def per_node_cases() -> list[Case]:
    from isthmus.ccm.openstack.instances import NodeRef

    def pid(region: str, form: str, label: str = "") -> Callable[..., Any]:
        def make(ids: dict[str, list[str]], names: dict[str, list[str]], i: int) -> Any:
            server = ids[region][i % len(ids[region])]
            provider_id = f"openstack://{region}/{server}" if form == "known" else f"openstack:///{server}"
            return NodeRef(f"n{i}", provider_id, label)
        return make

    def by_name(region: str, label: str = "") -> Callable[..., Any]:
        return lambda ids, names, i: NodeRef(names[region][i % len(names[region])], "", label)

    one, two = REGIONS
    return [
        Case("1 region (baseline): openstack:///ID", (one,), pid(one, "regionless")),
        Case("1 region: by name", (one,), by_name(one)),
        Case("2 regions: openstack://R/ID, R1", REGIONS, pid(one, "known")),
        Case("2 regions: openstack://R/ID, R2", REGIONS, pid(two, "known")),
        Case("2 regions: openstack:///ID, R1", REGIONS, pid(one, "regionless")),
        Case("2 regions: openstack:///ID, R2", REGIONS, pid(two, "regionless")),
        Case("2 regions: openstack:///ID, R2 +label", REGIONS, pid(two, "regionless", two)),
        Case("2 regions: by name, R2", REGIONS, by_name(two)),
        Case("2 regions: by name, R2 +label", REGIONS, by_name(two, two)),
        Case("NotReady check, 1 region (baseline)", (one,), pid(one, "regionless"), "notready"),
        Case("NotReady, 1 region, upstream 2 lookups", (one,), pid(one, "regionless"), "exists+shutdown"),
        Case("NotReady check, 2 regions, R2 known", REGIONS, pid(two, "known"), "notready"),
        Case("NotReady check, 2 regions, R2 /ID", REGIONS, pid(two, "regionless"), "notready"),
        Case("NotReady, 2 regions, R2 /ID +label", REGIONS, pid(two, "regionless", two), "notready"),
    ]


def run_op(instances: Any, op: str, node: Any) -> None:
    if op == "metadata":  # node controller: initialisation and address re-sync
        instances.instance_metadata(node)
    elif op == "notready":  # lifecycle controller: one lookup
        instances.instance_shutdown_if_exists(node)
    elif instances.instance_exists(node):  # what upstream's lifecycle controller does
        instances.instance_shutdown(node)


def measure_per_node(state_dir: Path, ids: dict[str, list[str]], names: dict[str, list[str]],
                     sample: int) -> list[tuple[Case, dict[str, float], dict[str, int]]]:
    rows = []
    for case in per_node_cases():
        instances, counter = make_instances(state_dir, case.regions)
        counter.reset()
        run_op(instances, case.op, case.node(ids, names, 0))  # cold: auth + discovery
        cold = counter.by_service()
        counter.reset()
        for i in range(1, sample + 1):
            run_op(instances, case.op, case.node(ids, names, i))
        warm = {k: v / sample for k, v in counter.by_service().items()}
        rows.append((case, warm, cold))
    return rows


def print_per_node(rows: list[tuple[Case, dict[str, float], dict[str, int]]], sample: int) -> None:
    print(f"API calls per node per sync (steady state, mean of {sample} nodes; 'cold' = first call of a new client)")
    print(f"{'case':40} {'nova':>5} {'neutron':>7} {'keystone':>8} {'total':>6} {'x base':>7}   cold total")
    base: dict[str, float] = {}
    for case, warm, cold in rows:
        total = sum(warm.values())
        group = "metadata" if case.op == "metadata" else "notready"
        base.setdefault(group, total)  # the first row of each group is its baseline
        print(f"{case.name:40} {warm.get('nova', 0):5.1f} {warm.get('neutron', 0):7.1f}"
              f" {warm.get('keystone', 0):8.1f} {total:6.1f} {total / base[group]:7.2f}   {sum(cold.values()):4d}")


# --- table 2: N nodes through the real controllers --------------------------------------------

class KubeEmulator:
    """kmock's Kubernetes emulator served from a background event loop."""

    def __init__(self) -> None:
        import kmock

        self._kmock = kmock
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self.handler: Any = None
        self.url = ""
        self._thread = threading.Thread(target=self.loop.run_until_complete, args=(self._serve(),), daemon=True)
        self._thread.start()
        self._ready.wait(30)

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with self._kmock.KubernetesEmulator() as handler, self._kmock.Server(handler) as server:
            self.handler, self.url = handler, str(server.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def put_nodes(self, nodes: dict[str, dict]) -> None:
        async def put() -> None:
            resource = self._kmock.resource("", "v1", "nodes")
            for name, body in nodes.items():
                self.handler.objects[resource, None, name] = body

        asyncio.run_coroutine_threadsafe(put(), self.loop).result(60)

    def close(self) -> None:
        assert self._stop is not None
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


def node_body(name: str, provider_id: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
            "spec": {"providerID": provider_id, "taints": [UNINIT]},
            "status": {"addresses": [], "conditions": [{"type": "Ready", "status": "False"}]}}


@dataclass(frozen=True)
class Mode:
    name: str
    regions: tuple[str, ...]  # configured
    spread: tuple[str, ...]  # where nodes' servers are
    known: bool  # openstack://REGION/ID rather than openstack:///ID


MODES = (
    Mode("1 region (baseline), /ID", ("RegionOne",), ("RegionOne",), False),
    Mode("2 regions, openstack://R/ID", REGIONS, REGIONS, True),
    Mode("2 regions, openstack:///ID", REGIONS, REGIONS, False),
)


@dataclass
class Fleet:
    """One mode's CCM: its own session and counter, its own emulated cluster of N Nodes."""

    mode: Mode
    instances: Any
    counter: CallCounter
    kube: KubeEmulator
    api: Any
    node_ctl: Any
    life: Any


def start_fleet(state_dir: Path, ids: dict[str, list[str]], nodes: int, mode: Mode) -> Fleet:
    from kubernetes import client

    from isthmus.ccm.controllers.lifecycle import LifecycleController
    from isthmus.ccm.controllers.node import NodeController
    from isthmus.ccm.kube.nodes import NodeAPI
    from isthmus.ccm.openstack.instances import NodeRef

    instances, counter = make_instances(state_dir, mode.regions)
    for region in mode.regions:  # auth + version discovery outside the timings
        instances.instance_exists(NodeRef("warm-up", f"openstack://{region}/{ids[region][0]}"))
    kube = KubeEmulator()
    bodies = {}
    for i in range(nodes):
        region = mode.spread[i % len(mode.spread)]
        server = ids[region][(i // len(mode.spread)) % len(ids[region])]
        pid = f"openstack://{region}/{server}" if mode.known else f"openstack:///{server}"
        bodies[f"node-{i:04d}"] = node_body(f"node-{i:04d}", pid)
    kube.put_nodes(bodies)
    cfg = client.Configuration()
    cfg.host = kube.url
    api = NodeAPI(client.CoreV1Api(client.ApiClient(cfg)))
    return Fleet(mode, instances, counter, kube, api, NodeController(api, instances),
                 LifecycleController(api, instances))


PASSES: tuple[tuple[str, Callable[[Fleet, list[Any]], None]], ...] = (
    ("init", lambda f, views: f.node_ctl.sync(views)),
    ("NotReady check", lambda f, views: f.life.monitor(views)),
    ("address re-sync", lambda f, views: f.node_ctl.update_addresses(views)),
)


def measure_fleets(state_dir: Path, ids: dict[str, list[str]], nodes: int,
                   chunk: int) -> dict[str, list[tuple[str, float, float, dict]]]:
    """Every pass of every mode, interleaved ``chunk`` nodes at a time.

    The machine is shared and its load drifts over minutes; switching modes every few
    seconds makes that drift hit every mode alike, so the ratios hold.
    """
    fleets = [start_fleet(state_dir, ids, nodes, mode) for mode in MODES]
    results: dict[str, list[tuple[str, float, float, dict]]] = {mode.name: [] for mode in MODES}
    try:
        for name, run in PASSES:
            wall = {f.mode.name: 0.0 for f in fleets}
            views = {}
            for fleet in fleets:
                fleet.counter.reset()
                started = time.perf_counter()
                views[fleet.mode.name] = fleet.api.list()
                wall[fleet.mode.name] += time.perf_counter() - started
            for first in range(0, nodes, chunk):
                for fleet in fleets:
                    started = time.perf_counter()
                    run(fleet, views[fleet.mode.name][first:first + chunk])
                    wall[fleet.mode.name] += time.perf_counter() - started
            for fleet in fleets:
                results[fleet.mode.name].append(
                    (name, wall[fleet.mode.name], fleet.counter.seconds, fleet.counter.by_service()))
        for fleet in fleets:
            done = sum(1 for v in fleet.api.list() if not v.has_taint(UNINIT["key"]))
            if done != nodes:
                raise SystemExit(f"{fleet.mode.name}: only {done}/{nodes} nodes initialised")
        return results
    finally:
        for fleet in reversed(fleets):  # kmock stacks a DNS interceptor per server: undo in reverse
            fleet.api.core.api_client.close()
            fleet.kube.close()


def print_fleet(results: dict[str, list[tuple[str, float, float, dict]]], nodes: int, chunk: int) -> None:
    print(f"\nTime to sync {nodes} nodes over 2 regions vs 1 (one pass each; modes interleaved every {chunk} nodes;"
          " real controllers, kmock + sandbox)")
    print(f"{'mode':30} {'pass':16} {'OS s':>6} {'x base':>7} {'wall s':>7} {'x base':>7} {'nova':>5}"
          f" {'neutron':>7} {'calls/node':>10} {'x base':>7}")
    base = {name: (os_s, wall, sum(c.values())) for name, wall, os_s, c in results[MODES[0].name]}
    for mode in MODES:
        for name, wall, os_seconds, counts in results[mode.name]:
            calls = sum(counts.values())
            b_os, b_wall, b_calls = base[name]
            print(f"{mode.name:30} {name:16} {os_seconds:6.1f} {os_seconds / b_os:7.2f} {wall:7.1f}"
                  f" {wall / b_wall:7.2f} {counts.get('nova', 0):5d} {counts.get('neutron', 0):7d}"
                  f" {calls / nodes:10.2f} {calls / b_calls:7.2f}")
    print("(OS s: time inside OpenStack requests; wall: the whole pass, incl. Kubernetes calls to the kmock"
          " emulator, which are not a real API server's cost)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", type=Path, default=Path(".sandbox"), help="a running sandbox")
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--servers-per-region", type=int, default=2)
    parser.add_argument("--sample", type=int, default=10, help="nodes per case in the per-node table")
    parser.add_argument("--chunk", type=int, default=25, help="nodes per mode before switching to the next mode")
    args = parser.parse_args()
    if not (args.state_dir / "clouds.yaml").exists():
        raise SystemExit(f"no sandbox in {args.state_dir}: start one with `isthmus sandbox up --state-dir ...`")
    warnings.simplefilter("ignore")
    import logging

    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # keep-alive handlers left at emulator shutdown
    with fleet(args.state_dir, args.servers_per_region) as ids:
        names = {region: [connect(args.state_dir, region).compute.get_server(i).name for i in server_ids]
                 for region, server_ids in ids.items()}
        rows = measure_per_node(args.state_dir, ids, names, args.sample)
        results = measure_fleets(args.state_dir, ids, args.nodes, args.chunk)
    print_per_node(rows, args.sample)
    print_fleet(results, args.nodes, args.chunk)


if __name__ == "__main__":
    main()
