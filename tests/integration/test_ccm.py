"""The multi-region CCM against the real sandbox.

Real Nova and Neutron in RegionOne and RegionTwo behind one Keystone; Nodes
live in the kmock Kubernetes emulator. The controllers are the production
ones: ``kubernetes.client`` over HTTP to kmock, openstacksdk over one
keystoneauth session built from a real ``cloud.conf`` (user ``demo``, as a
CCM would run), and in one test the ``isthmus-ccm`` console script itself.

Servers (booted once per module on one network, removed afterwards with it):

========  =========  ================================================
short     region     role
========  =========  ================================================
twin      RegionOne  same name as RegionTwo's ``twin``
one       RegionOne  a plain node
off       RegionOne  stopped by the lifecycle test, started again
twin      RegionTwo  same name as RegionOne's ``twin``
two       RegionTwo  a plain node
gone      RegionTwo  deleted by the lifecycle test
========  =========  ================================================

The outage test stops RegionTwo's ``nova-api`` by pid and starts it again
(``isthmus.sandbox.nova.start_api``) before it returns, and the hang test
freezes it (SIGSTOP) and thaws it (SIGCONT), so the shared sandbox stays
usable. Networks: one in CentralRegion with Isthmus networking (the sandbox
default), one per region on a ``--plain`` sandbox.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from tests.integration.helpers import delete_user_ports
from tests.kmock_clients import api_client, write_kubeconfig
from tests.sandboxes import BIN

pytestmark = pytest.mark.integration

REGIONS = ("RegionOne", "RegionTwo")
LAYOUT = {"RegionOne": ("twin", "one", "off"), "RegionTwo": ("twin", "two", "gone")}
T = TypeVar("T")

UNINIT = {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}
SHUTDOWN_KEY = "node.cloudprovider.kubernetes.io/shutdown"


@dataclass
class World:
    tag: str
    sandbox: Any
    ids: dict[tuple[str, str], str]  # (region, short) -> server id
    ips: dict[tuple[str, str], list[str]]  # (region, short) -> fixed IPs of its ports
    conf: Path  # INI cloud.conf: region=RegionOne, regions=RegionOne, regions=RegionTwo
    clouds_conf: Path  # use-clouds=true against the sandbox's clouds.yaml

    def name(self, short: str) -> str:
        return f"{self.tag}-{short}"

    def connect(self, region: str) -> Any:
        return self.sandbox.connect(region)


def write_cloud_confs(sandbox: Any, directory: Path) -> tuple[Path, Path]:
    """cloud.conf files as an operator would write them for this Keystone.

    The clouds.yaml variant uses its own clouds.yaml: the sandbox's lists
    CentralRegion, whose compute endpoint is the Isthmus gateway (every
    region's servers), which a CCM must not search.
    """
    auth = yaml.safe_load(sandbox.clouds_yaml.read_text())["clouds"]["isthmus-demo"]["auth"]
    ini = directory / "cloud.conf"
    ini.write_text(
        "[Global]\n"
        f"auth-url = {auth['auth_url']}\n"
        f"username = {auth['username']}\n"
        f'password = "{auth["password"]}"\n'
        f"tenant-name = {auth['project_name']}\n"
        "domain-name = Default\n"
        "region = RegionOne\n"
        "regions = RegionOne\n"
        "regions = RegionTwo\n"
        "\n[Metadata]\nrequest-timeout = 30s\n"
    )
    clouds_yaml = directory / "clouds.yaml"
    clouds_yaml.write_text(yaml.safe_dump({"clouds": {"k8s": {
        "auth": auth, "identity_api_version": 3, "interface": "public",
        "region_name": "RegionTwo",
        # RegionTwo first (region_name), then RegionOne; a region with its own Keystone is skipped
        "regions": ["RegionTwo", "RegionOne",
                    {"name": "Elsewhere", "values": {"auth": {**auth, "auth_url": "http://192.0.2.1/v3"}}}],
    }}}))
    clouds = directory / "cloud-clouds.conf"
    clouds.write_text(f"[Global]\nuse-clouds = true\nclouds-file = {clouds_yaml}\ncloud = k8s\n")
    return ini, clouds


def _networks(sandbox: Any, tag: str, made: dict[str, Any]) -> dict[str, str]:
    """The network each region boots on.

    With Isthmus networking (the sandbox default) one network is created in
    CentralRegion and every region copies it on first use; a ``--plain``
    sandbox has one network per region, as stock OpenStack.
    """
    from isthmus.sandbox.layout import CENTRAL_REGION, Layout

    layout = Layout.load(sandbox.state_dir)
    plain = bool(layout and layout.plain)
    out = {}
    for index, region in enumerate((*REGIONS,) if plain else (CENTRAL_REGION,)):
        conn = sandbox.connect(region)
        net = conn.network.create_network(name=f"{tag}-net")
        made["networks"].append((region, net.id))
        conn.network.create_subnet(network_id=net.id, ip_version=4, cidr=f"10.{150 + index}.0.0/24")
        out[region] = net.id
    return out if plain else {region: out[CENTRAL_REGION] for region in REGIONS}


def _odd_flavor(sandbox: Any, region: str, tag: str, made: dict[str, Any]) -> Any:
    """A flavor whose name is no label value: Nova embeds only that name in the
    server (2.47+), and the node's instance-type must be the flavor's ID."""
    admin = sandbox.connect(region, cloud="isthmus-admin").compute
    tiny = admin.find_flavor("m1.tiny", ignore_missing=False)
    flavor = admin.create_flavor(name=f"{tag} gpu (x2)", ram=tiny.ram, vcpus=tiny.vcpus, disk=tiny.disk)
    made["flavors"].append((region, flavor.id))
    return flavor


def _boot_all(sandbox: Any, tag: str, made: dict[str, Any]) -> dict[tuple[str, str], Any]:
    networks = _networks(sandbox, tag, made)
    servers: dict[tuple[str, str], Any] = {}
    for region in REGIONS:
        conn = sandbox.connect(region)
        image = conn.image.find_image("tiny", ignore_missing=False)
        flavor = conn.compute.find_flavor("m1.tiny", ignore_missing=False)
        for short in LAYOUT[region]:
            kind = _odd_flavor(sandbox, region, tag, made) if short == "two" else flavor
            server = conn.compute.create_server(name=f"{tag}-{short}", image_id=image.id, flavor_id=kind.id,
                                                networks=[{"uuid": networks[region]}])
            made["servers"].append((region, server.id))
            servers[region, short] = server

    def wait(item: tuple[tuple[str, str], Any]) -> tuple[tuple[str, str], Any]:
        (region, short), server = item
        return (region, short), sandbox.connect(region).compute.wait_for_server(server, wait=300)

    with ThreadPoolExecutor(4) as pool:
        return dict(pool.map(wait, servers.items()))


def _cleanup(sandbox: Any, made: dict[str, Any]) -> None:
    for region, server_id in made["servers"]:
        sandbox.connect(region).compute.delete_server(server_id, ignore_missing=True)
    for region, server_id in made["servers"]:
        conn = sandbox.connect(region)
        server = conn.compute.find_server(server_id, ignore_missing=True)
        if server is not None:
            conn.compute.wait_for_delete(server, wait=180)
    for region, flavor_id in made.get("flavors", []):
        sandbox.connect(region, cloud="isthmus-admin").compute.delete_flavor(flavor_id, ignore_missing=True)
    for region, net_id in made["networks"]:
        conn = sandbox.connect(region)
        delete_user_ports(conn, net_id)
        for attempt in range(60):  # ports of deleted servers may still be going
            try:
                conn.network.delete_network(net_id, ignore_missing=True)
                break
            except Exception:  # noqa: BLE001 - retried; the last attempt reports
                if attempt == 59:
                    raise
                time.sleep(1)


@pytest.fixture(scope="module")
def world(sandbox: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tag = f"ccm-{uuid.uuid4().hex[:6]}"
    made: dict[str, Any] = {"servers": [], "networks": [], "flavors": []}
    try:
        servers = _boot_all(sandbox, tag, made)
        for key, server in servers.items():
            assert server.status == "ACTIVE", f"{key}: {server.status} {server.fault}"
        ips = {}
        for (region, short), server in servers.items():
            ports = list(sandbox.connect(region).network.ports(device_id=server.id))
            ips[region, short] = [ip["ip_address"] for p in ports for ip in p.fixed_ips]
        conf, clouds_conf = write_cloud_confs(sandbox, tmp_path_factory.mktemp("ccm"))
        yield World(tag, sandbox, {k: s.id for k, s in servers.items()}, ips, conf, clouds_conf)
    finally:
        _cleanup(sandbox, made)


# --- Kubernetes side: the production client against kmock ------------------------------------

def node_api(kmock: Any) -> Any:
    from kubernetes import client

    from isthmus.ccm.kube.nodes import NodeAPI

    return NodeAPI(client.CoreV1Api(api_client(kmock)))


def nodes_resource() -> Any:
    import kmock

    return kmock.resource("", "v1", "nodes")


def put_node(kmock: Any, name: str, provider_id: str = "", ready: bool | None = None,
             taints: list[dict] | None = None, labels: dict | None = None,
             addresses: list[dict] | None = None) -> None:
    status: dict[str, Any] = {"addresses": addresses or []}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    spec: dict[str, Any] = {"taints": taints or []}
    if provider_id:
        spec["providerID"] = provider_id
    kmock.objects[nodes_resource(), None, name] = {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
        "spec": spec, "status": status,
    }


def node_obj(kmock: Any, name: str) -> dict:
    return dict(kmock.objects[nodes_resource(), None, name].raw)


def node_exists(kmock: Any, name: str) -> bool:
    key = (nodes_resource(), None, name)
    return key in kmock.objects and not kmock.objects[key].deleted


async def in_thread(fn: Callable[[], T]) -> T:
    # kmock serves on this event loop; blocking clients must run elsewhere.
    return await asyncio.to_thread(fn)


def NodeRef_(name: str, provider_id: str = "") -> Any:  # noqa: N802 - the class, imported late
    from isthmus.ccm.openstack.instances import NodeRef

    return NodeRef(name, provider_id)


def instances(world: World, regional: bool = True) -> Any:
    """What isthmus-ccm builds at startup, from the real cloud.conf."""
    from isthmus.ccm.config import load_config
    from isthmus.ccm.openstack.clients import OpenStackClients
    from isthmus.ccm.openstack.instances import Instances

    config = load_config(world.conf)
    return Instances(OpenStackClients.from_config(config), config.regions, config.networking,
                     environ={"OS_CCM_REGIONAL": "true" if regional else ""})


def labels_of(region: str, zone: str, kind: str = "m1.tiny") -> dict[str, str]:
    return {
        "topology.kubernetes.io/region": region, "failure-domain.beta.kubernetes.io/region": region,
        "topology.kubernetes.io/zone": zone, "failure-domain.beta.kubernetes.io/zone": zone,
        "node.kubernetes.io/instance-type": kind, "beta.kubernetes.io/instance-type": kind,
    }


# --- tests --------------------------------------------------------------------------------------

@pytest.mark.asyncio
async def test_initialisation_sets_region_zone_type_provider_id_addresses(kmock: Any, world: World) -> None:
    from isthmus.ccm.controllers.node import NodeController
    from isthmus.ccm.openstack.instances import NodeRef

    hostname = {"type": "Hostname", "address": f"{world.name('one')}.cluster.local"}
    put_node(kmock, world.name("one"), taints=[UNINIT], addresses=[hostname])
    put_node(kmock, world.name("two"), taints=[UNINIT])
    # the kubelet may set the region label itself: it picks RegionTwo's twin
    put_node(kmock, world.name("twin"), taints=[UNINIT], labels={"topology.kubernetes.io/region": "RegionTwo"})
    # a kubelet-set region-less providerID: searched by ID, RegionOne answers 404, RegionTwo has it
    alias_pid = f"openstack:///{world.ids['RegionTwo', 'two']}"
    put_node(kmock, "kubelet-named-node", alias_pid, taints=[UNINIT])
    inst = instances(world)
    nodes = node_api(kmock)
    await in_thread(lambda: NodeController(nodes, inst).sync(nodes.list()))

    one = node_obj(kmock, world.name("one"))
    assert one["spec"]["providerID"] == f"openstack://RegionOne/{world.ids['RegionOne', 'one']}"
    assert one["spec"]["taints"] == []
    assert one["metadata"]["labels"] == labels_of("RegionOne", "az1")
    ips = world.ips["RegionOne", "one"]
    assert ips and one["status"]["addresses"] == [{"type": "InternalIP", "address": ip} for ip in ips] + [hostname]

    two = node_obj(kmock, world.name("two"))
    assert two["spec"]["providerID"] == f"openstack://RegionTwo/{world.ids['RegionTwo', 'two']}"
    # Its flavor's name is no label value: the flavor ID, as OCCM gives, and its taint is gone.
    # Nova's own reply (2.47+: the flavor embedded by name, no id), the shape that needed a lookup.
    reply = world.connect("RegionTwo").compute.get(f"/servers/{world.ids['RegionTwo', 'two']}", microversion="2.47")
    odd = reply.json()["server"]["flavor"]
    assert "id" not in odd and odd["original_name"].endswith("gpu (x2)"), odd
    odd_id = world.connect("RegionTwo").compute.find_flavor(odd["original_name"], ignore_missing=False).id
    assert two["metadata"]["labels"] == labels_of("RegionTwo", "az2", odd_id)
    assert two["spec"]["taints"] == []
    assert two["status"]["addresses"] == [{"type": "InternalIP", "address": ip} for ip in world.ips["RegionTwo", "two"]]

    twin = node_obj(kmock, world.name("twin"))
    assert twin["spec"]["providerID"] == f"openstack://RegionTwo/{world.ids['RegionTwo', 'twin']}"
    assert twin["metadata"]["labels"] == labels_of("RegionTwo", "az2")

    alias = node_obj(kmock, "kubelet-named-node")
    assert alias["spec"]["providerID"] == alias_pid  # never replaced once set
    assert alias["spec"]["taints"] == []
    assert alias["metadata"]["labels"] == labels_of("RegionTwo", "az2", odd_id)

    # without the label the twin name resolves in the first configured region
    meta = await in_thread(lambda: inst.instance_metadata(NodeRef(world.name("twin"))))
    assert (meta.region, meta.zone) == ("RegionOne", "az1")
    assert meta.provider_id == f"openstack://RegionOne/{world.ids['RegionOne', 'twin']}"
    # OS_CCM_REGIONAL unset: the classic providerID form
    plain = instances(world, regional=False)
    meta = await in_thread(lambda: plain.instance_metadata(NodeRef(world.name("two"))))
    assert meta.provider_id == f"openstack:///{world.ids['RegionTwo', 'two']}"


@pytest.mark.asyncio
async def test_lifecycle_deletes_gone_and_taints_stopped(kmock: Any, world: World) -> None:
    from isthmus.ccm.controllers.lifecycle import LifecycleController

    r1, r2 = world.connect("RegionOne"), world.connect("RegionTwo")
    gone_id, off_id = world.ids["RegionTwo", "gone"], world.ids["RegionOne", "off"]

    def stop_and_delete() -> None:
        gone = r2.compute.get_server(gone_id)  # before the delete: after it, a GET may already 404
        r1.compute.stop_server(off_id)
        r2.compute.delete_server(gone)
        r1.compute.wait_for_server(r1.compute.get_server(off_id), status="SHUTOFF", wait=180)
        r2.compute.wait_for_delete(gone, wait=180)

    await in_thread(stop_and_delete)
    put_node(kmock, world.name("gone"), f"openstack:///{gone_id}", ready=False)  # region-less: both regions say 404
    put_node(kmock, world.name("off"), f"openstack://RegionOne/{off_id}", ready=False)
    put_node(kmock, world.name("one"), f"openstack://RegionOne/{world.ids['RegionOne', 'one']}", ready=False)
    put_node(kmock, world.name("two"), f"openstack://RegionTwo/{world.ids['RegionTwo', 'two']}", ready=True)
    nodes = node_api(kmock)
    ctl = LifecycleController(nodes, instances(world))
    await in_thread(lambda: ctl.monitor(nodes.list()))

    names = await in_thread(lambda: sorted(n.name for n in nodes.list()))
    assert names == sorted([world.name("off"), world.name("one"), world.name("two")])
    off_taints = node_obj(kmock, world.name("off"))["spec"]["taints"]
    assert [(t["key"], t["effect"]) for t in off_taints] == [(SHUTDOWN_KEY, "NoSchedule")]
    assert node_obj(kmock, world.name("one"))["spec"]["taints"] == []  # ACTIVE: NotReady but left alone

    # the server starts again; once the kubelet reports Ready the taint goes
    def start() -> None:
        r1.compute.start_server(off_id)
        r1.compute.wait_for_server(r1.compute.get_server(off_id), status="ACTIVE", wait=180)

    await in_thread(start)
    await in_thread(lambda: ctl.monitor(nodes.list()))
    assert [t["key"] for t in node_obj(kmock, world.name("off"))["spec"]["taints"]] == [SHUTDOWN_KEY]
    kmock.objects[nodes_resource(), None, world.name("off")].patch(
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    await in_thread(lambda: ctl.monitor(nodes.list()))
    assert node_obj(kmock, world.name("off"))["spec"]["taints"] == []


def _nova_api_record(state_dir: Path, region: str) -> Any:
    from isthmus.sandbox.process import ServiceRecord

    return next(r for r in ServiceRecord.load_all(state_dir / "run") if r.name == f"nova-api-{region}")


def _restart_nova_api(state_dir: Path, region: str) -> None:
    from isthmus.sandbox import nova, runtime
    from isthmus.sandbox.layout import Layout

    layout = Layout.load(state_dir)
    assert layout is not None
    runtime.wait_http(nova.start_api(layout, region), timeout=300)


@pytest.mark.asyncio
@pytest.mark.exclusive
async def test_region_two_nova_down_deletes_nothing_and_names_the_region(
        kmock: Any, world: World, caplog: pytest.LogCaptureFixture) -> None:
    from isthmus.ccm.controllers.lifecycle import LifecycleController
    from isthmus.ccm.controllers.node import NodeController
    from isthmus.ccm.errors import RegionError
    from isthmus.ccm.kube.informer import Backoff
    from isthmus.ccm.openstack.instances import NodeRef
    from isthmus.sandbox import process

    caplog.set_level(logging.WARNING, logger="isthmus.ccm")
    missing = str(uuid.uuid4())
    r2_pid = f"openstack://RegionTwo/{world.ids['RegionTwo', 'two']}"
    put_node(kmock, "r2-known", r2_pid, ready=False)
    put_node(kmock, "r2-maybe", f"openstack:///{missing}", ready=False)  # 404 in RegionOne, RegionTwo cannot say
    put_node(kmock, world.name("nowhere"), ready=False)  # no providerID: a name search everywhere
    put_node(kmock, "r1-missing", f"openstack://RegionOne/{missing}", ready=False)  # RegionOne answers: gone
    put_node(kmock, world.name("one"), taints=[UNINIT])  # RegionOne keeps initialising nodes
    put_node(kmock, world.name("two"), taints=[UNINIT])  # a RegionTwo node cannot be initialised now
    nodes = node_api(kmock)
    inst = instances(world)
    now = [0.0]
    node_ctl = NodeController(nodes, inst, Backoff(clock=lambda: now[0]))
    # even in upstream mode (deleting nodes found by no name) nothing is deleted on doubt
    life = LifecycleController(nodes, inst, delete_without_provider_id=True)
    # warm the RegionTwo client up, so the outage hits an established connection too
    await in_thread(lambda: inst.instance_exists(NodeRef("r2-known", r2_pid)))

    state_dir = world.sandbox.state_dir
    process.stop(_nova_api_record(state_dir, "RegionTwo"))
    try:
        await in_thread(lambda: life.monitor(nodes.list()))
        await in_thread(lambda: node_ctl.sync(nodes.list()))
        names = await in_thread(lambda: sorted(n.name for n in nodes.list()))
        assert names == sorted(["r2-known", "r2-maybe", world.name("nowhere"), world.name("one"), world.name("two")])
        assert node_obj(kmock, world.name("one"))["metadata"]["labels"]["topology.kubernetes.io/region"] == "RegionOne"
        assert node_obj(kmock, world.name("two"))["spec"]["taints"] == [UNINIT]

        doubtful = ("r2-known", "r2-maybe", world.name("nowhere"), world.name("two"))
        failures = {n: [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"node {n}:")]
                    for n in doubtful}
        assert all(failures.values()), caplog.text  # every doubtful node reported...
        for messages in failures.values():
            assert all("region RegionTwo:" in m for m in messages), messages  # ...naming RegionTwo
        with pytest.raises(RegionError) as info:
            await in_thread(lambda: inst.instance_exists(NodeRef("r2-maybe", f"openstack:///{missing}")))
        assert info.value.region == "RegionTwo"
    finally:
        await in_thread(lambda: _restart_nova_api(state_dir, "RegionTwo"))

    # RegionTwo is back: the same controllers (same cached clients) see it again
    await in_thread(lambda: life.monitor(nodes.list()))
    now[0] += 60
    await in_thread(lambda: node_ctl.sync(nodes.list()))
    names = await in_thread(lambda: sorted(n.name for n in nodes.list()))
    assert names == sorted(["r2-known", world.name("one"), world.name("two")])  # clean 404s everywhere now
    assert node_obj(kmock, world.name("two"))["spec"]["providerID"] == r2_pid


@pytest.mark.asyncio
@pytest.mark.exclusive
async def test_hung_region_two_costs_one_timeout_not_one_per_node(
        kmock: Any, world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """RegionTwo's nova-api frozen (SIGSTOP): calls time out instead of being refused.

    Without the per-region pause every RegionTwo node would cost a full
    request-timeout per pass, and RegionOne's nodes would wait behind them.
    """

    from isthmus.ccm.controllers.lifecycle import LifecycleController
    from isthmus.ccm.controllers.node import NodeController
    from isthmus.sandbox import process

    timeout = 10.0  # long enough that a busy RegionOne (and the warm-up call below) still answers in time
    conf = tmp_path / "cloud.conf"
    conf.write_text(world.conf.read_text().replace("request-timeout = 30s", f"request-timeout = {timeout:g}s"))
    world_fast = World(world.tag, world.sandbox, world.ids, world.ips, conf, world.clouds_conf)
    inst = instances(world_fast)
    stuck = [f"stuck-{i}" for i in range(6)]
    for name in stuck:
        put_node(kmock, name, f"openstack:///{uuid.uuid4()}", ready=False)  # RegionOne: 404, then RegionTwo
    put_node(kmock, world.name("one"), taints=[UNINIT])
    nodes = node_api(kmock)
    await in_thread(lambda: inst.instance_exists(
        NodeRef_("warm", f"openstack://RegionTwo/{world.ids['RegionTwo', 'two']}")))

    record = _nova_api_record(world.sandbox.state_dir, "RegionTwo")
    caplog.set_level(logging.WARNING, logger="isthmus.ccm")
    os.killpg(record.pid, signal.SIGSTOP)
    try:
        await in_thread(lambda: LifecycleController(nodes, inst).monitor(nodes.list()))
        await in_thread(lambda: NodeController(nodes, inst).sync(nodes.list()))
    finally:
        os.killpg(record.pid, signal.SIGCONT)
    await in_thread(lambda: process.wait_until(lambda: process.http_ok(record.url), "nova-api back", 120))
    # Counted, not timed: RegionTwo was asked until its first timeout, then paused.
    trips = [r.getMessage() for r in caplog.records if "timed out" in r.getMessage()]
    assert len([t for t in trips if t.startswith("region RegionTwo")]) == 1, trips
    names = await in_thread(lambda: {n.name for n in nodes.list()})
    assert set(stuck) <= names  # nothing deleted
    one = node_obj(kmock, world.name("one"))
    assert one["spec"]["taints"] == [] and one["spec"]["providerID"].startswith("openstack://RegionOne/")


@pytest.mark.asyncio
async def test_isthmus_ccm_process_initialises_and_holds_the_lease(
        kmock: Any, world: World, tmp_path: Path) -> None:
    """The console script, as the Deployment runs it, against kmock and the sandbox."""
    import kmock as km

    kubeconfig = write_kubeconfig(kmock, tmp_path / "kubeconfig")
    put_node(kmock, world.name("two"), taints=[UNINIT])
    put_node(kmock, "ghost", f"openstack://RegionOne/{uuid.uuid4()}", ready=False)
    env = {k: v for k, v in os.environ.items() if k != "OS_CCM_REGIONAL"}
    log = tmp_path / "ccm.log"
    with socket.socket() as probe:  # a free port for /healthz, /readyz, /metrics
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(BIN / "isthmus-ccm"), "--cloud-config", str(world.conf),
                                 "--kubeconfig", str(kubeconfig), "--identity", "test-ccm",
                                 "--node-monitor-period", "1", "--bind-address", "127.0.0.1",
                                 "--http-port", str(port)], stdout=out, stderr=subprocess.STDOUT, env=env)

    def http_get(path: str) -> tuple[int, str]:
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    try:
        for _ in range(240):
            spec = node_obj(kmock, world.name("two"))["spec"]
            gone = not node_exists(kmock, "ghost")
            if spec.get("providerID") and gone or proc.poll() is not None:
                break
            await asyncio.sleep(0.25)
        assert proc.poll() is None, log.read_text()
        spec = node_obj(kmock, world.name("two"))["spec"]
        assert spec.get("providerID") == f"openstack:///{world.ids['RegionTwo', 'two']}", log.read_text()
        assert spec["taints"] == []
        assert not node_exists(kmock, "ghost"), log.read_text()
        lease = kmock.objects[km.resource("coordination.k8s.io", "v1", "leases"), "kube-system",
                              "isthmus-cloud-controller-manager"].raw
        assert lease["spec"]["holderIdentity"] == "test-ccm"
        # a node joining now is seen by the watch: no second LIST of nodes
        put_name = world.name("one")
        await in_thread(lambda: __import__("kubernetes").client.CoreV1Api(api_client(kmock)).create_node(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": put_name}, "spec": {"taints": [UNINIT]}},
            _request_timeout=10))
        for _ in range(240):
            if node_obj(kmock, put_name)["spec"].get("providerID") or proc.poll() is not None:
                break
            await asyncio.sleep(0.25)
        assert node_obj(kmock, put_name)["spec"].get("providerID") == \
            f"openstack:///{world.ids['RegionOne', 'one']}", log.read_text()
        node_lists = [r for r in kmock if r.resource == nodes_resource() and r.action == km.action.LIST]
        assert len(node_lists) == 1, log.read_text()
        wanted = {(world.name("two"), "Synced"), (put_name, "Synced"), ("ghost", "DeletingNode")}
        for _ in range(40):  # the Event is written just after the Node's patch: wait for it, bounded
            events = [dict(o.raw) for (res, _, _), o in list(kmock.objects.items())
                      if res == km.resource("", "v1", "events")]
            reasons = {(e["involvedObject"]["name"], e["reason"]) for e in events}
            if wanted <= reasons:
                break
            await asyncio.sleep(0.25)
        assert wanted <= reasons, reasons
        # probes and metrics, as the Deployment's kubelet and Prometheus read them
        assert (await in_thread(lambda: http_get("/healthz")))[0] == 200
        assert (await in_thread(lambda: http_get("/readyz")))[0] == 200
        code, metrics = await in_thread(lambda: http_get("/metrics"))
        assert code == 200
        assert 'isthmus_ccm_openstack_requests_total{region="RegionTwo",result="ok"}' in metrics, metrics
        assert "isthmus_ccm_leader 1.0" in metrics and 'isthmus_ccm_region_paused{region="RegionTwo"} 0.0' in metrics
    finally:
        proc.send_signal(signal.SIGTERM)
        for _ in range(80):
            if proc.poll() is not None:
                break
            await asyncio.sleep(0.25)
        else:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, log.read_text()
    lease = kmock.objects[km.resource("coordination.k8s.io", "v1", "leases"), "kube-system",
                          "isthmus-cloud-controller-manager"].raw
    assert not lease["spec"].get("holderIdentity")  # released on SIGTERM: a standby takes over at once


def ccm_lookup(*args: str, regional: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "OS_CCM_REGIONAL": "true" if regional else ""}
    return subprocess.run([str(BIN / "isthmus"), "ccm", "lookup", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_lookup_cli(world: World) -> None:
    two = ccm_lookup("--cloud-config", str(world.conf), "--node-name", world.name("two"))
    assert two.returncode == 0, two.stderr
    assert json.loads(two.stdout) == {
        "providerID": f"openstack://RegionTwo/{world.ids['RegionTwo', 'two']}",
        "instanceType": world.connect("RegionTwo").compute.find_flavor(f"{world.tag} gpu (x2)").id,
        "zone": "az2", "region": "RegionTwo",
        "addresses": [{"type": "InternalIP", "address": ip} for ip in world.ips["RegionTwo", "two"]],
    }
    twin = ccm_lookup("--cloud-config", str(world.conf), "--node-name", world.name("twin"),
                      "--region-label", "RegionTwo", regional=False)
    assert twin.returncode == 0, twin.stderr
    assert json.loads(twin.stdout)["providerID"] == f"openstack:///{world.ids['RegionTwo', 'twin']}"
    by_id = ccm_lookup("--cloud-config", str(world.conf), "--provider-id", f"/{world.ids['RegionOne', 'twin']}")
    assert json.loads(by_id.stdout)["region"] == "RegionOne"

    unknown = ccm_lookup("--cloud-config", str(world.conf), "--provider-id", "openstack://RegionNine/x")
    assert unknown.returncode == 1 and unknown.stdout == ""
    assert unknown.stderr.count("\n") == 1 and 'didn\'t match supported regions "RegionOne,RegionTwo"' in unknown.stderr
    nowhere = ccm_lookup("--cloud-config", str(world.conf), "--node-name", world.name("nowhere"))
    assert nowhere.returncode == 1 and "instance not found" in nowhere.stderr


def test_lookup_cli_with_clouds_yaml(world: World) -> None:
    """use-clouds: credentials and regions from clouds.yaml, read by openstacksdk's loader.

    ``region_name`` RegionTwo leads the search, so the twin name resolves there; the
    ``Elsewhere`` entry carries its own auth and is never searched.
    """
    twin = ccm_lookup("--cloud-config", str(world.clouds_conf), "--node-name", world.name("twin"))
    assert twin.returncode == 0, twin.stderr
    assert json.loads(twin.stdout)["providerID"] == f"openstack://RegionTwo/{world.ids['RegionTwo', 'twin']}"
    one = ccm_lookup("--cloud-config", str(world.clouds_conf), "--node-name", world.name("one"))
    assert json.loads(one.stdout)["region"] == "RegionOne", one.stderr
    nowhere = ccm_lookup("--cloud-config", str(world.clouds_conf), "--node-name", world.name("nowhere"))
    assert nowhere.returncode == 1
    assert "instance not found" in nowhere.stderr and "regions RegionTwo,RegionOne\n" in nowhere.stderr, nowhere.stderr


def test_a_misspelt_region_is_fatal_at_start_and_names_it(world: World, tmp_path: Path) -> None:
    """Issue 26 item 11: ``regions = RegionTow`` was a warning and the CCM ran on."""
    conf = tmp_path / "cloud.conf"
    conf.write_text(world.conf.read_text().replace("regions = RegionTwo\n",
                                                   "regions = RegionTwo\nregions = RegionTow\n"))
    env = {k: v for k, v in os.environ.items() if k != "OS_CCM_REGIONAL"}
    proc = subprocess.run([str(BIN / "isthmus-ccm"), "--cloud-config", str(conf), "--kubeconfig",
                           str(tmp_path / "no-kubeconfig")], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "regions RegionTow: not known to Keystone" in proc.stderr, proc.stderr
