"""LoadBalancer Services on the sandbox's Octavia in RegionOne and RegionTwo.

The service controller is the production one: ``kubernetes.client`` over HTTP
to kmock, openstacksdk's Octavia and Neutron proxies over one keystoneauth
session built from a real ``cloud.conf`` (user ``demo``, with a
``[LoadBalancer "RegionX"]`` subnet per region). Nodes are kmock objects with
``openstack://REGION/ID`` providerIDs: the service controller reads the
region from there and never asks Nova, so no server is booted.

The sandbox's Octavia runs the amphora flows with no-op drivers: load
balancers, listeners, pools and members reach ACTIVE without VMs, every VIP
is 198.51.100.1, and the VIP port does not exist in Neutron, so floating IPs
cannot be associated here (their logic is unit-tested with fakes).

Every test cleans up its load balancers (the cluster name is unique per
module) and the per-region networks go at the end. The outage test stops
``octavia-api-RegionTwo`` with ``isthmus sandbox stop`` and always restarts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.integration.test_ccm import write_cloud_confs
from tests.kmock_clients import core_api, write_kubeconfig
from tests.sandboxes import BIN

pytestmark = pytest.mark.integration

REGIONS = ("RegionOne", "RegionTwo")
VIP = "198.51.100.1"  # the sandbox's no-op network driver gives every VIP this address
T = TypeVar("T")


@dataclass
class LBWorld:
    tag: str
    sandbox: Any
    subnets: dict[str, str]  # region -> subnet id
    conf: Path

    def octavia(self, region: str) -> Any:
        return self.sandbox.connect(region).load_balancer


@pytest.fixture(scope="module")
def lbworld(sandbox: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LBWorld]:
    tag = f"lb{uuid.uuid4().hex[:6]}"
    nets: dict[str, Any] = {}
    try:
        subnets = {}
        for index, region in enumerate(REGIONS):
            conn = sandbox.connect(region)
            net = conn.network.create_network(name=f"{tag}-net")
            nets[region] = net
            subnets[region] = conn.network.create_subnet(network_id=net.id, ip_version=4,
                                                         cidr=f"10.{130 + index}.0.0/24").id
        ini, _ = write_cloud_confs(sandbox, tmp_path_factory.mktemp("ccm-lb"))
        ini.write_text(ini.read_text() + "\n[LoadBalancer]\ncreate-monitor = true\nmonitor-delay = 5s\n" + "".join(
            f'\n[LoadBalancer "{region}"]\nsubnet-id = {subnet}\n' for region, subnet in subnets.items()))
        yield LBWorld(tag, sandbox, subnets, ini)
    finally:
        for region in REGIONS:
            lbs = sandbox.connect(region).load_balancer
            for lb in list(lbs.load_balancers()):
                if tag in (lb.name or ""):
                    lbs.delete_load_balancer(lb.id, cascade=True, ignore_missing=True)
            for lb in list(lbs.load_balancers()):
                if tag in (lb.name or ""):
                    lbs.wait_for_delete(lb, wait=120)
        for region, net in nets.items():
            sandbox.connect(region).network.delete_network(net.id, ignore_missing=True)


# --- Kubernetes side ------------------------------------------------------------------------

def resource(plural: str) -> Any:
    import kmock

    return kmock.resource("", "v1", plural)


async def in_thread(fn: Callable[[], T]) -> T:
    return await asyncio.to_thread(fn)


def controller(kmock: Any, world: LBWorld) -> Any:
    """What isthmus-ccm builds at startup, from the real cloud.conf."""
    from isthmus.ccm.config import load_config
    from isthmus.ccm.controllers.service import ServiceController
    from isthmus.ccm.kube.services import ServiceAPI
    from isthmus.ccm.openstack.clients import build_session
    from isthmus.ccm.openstack.loadbalancer.octavia import OctaviaClients

    config = load_config(world.conf)
    octavia = OctaviaClients(build_session(config), config.regions, config.global_.interface)
    return ServiceController(ServiceAPI(core_api(kmock)), octavia, config.load_balancer, config.regions,
                             cluster_name=world.tag, wait_timeout=120, resync=0)


def put_node(kmock: Any, name: str, region: str, ip: str, ready: bool = True, unschedulable: bool = False,
             server_id: str | None = None) -> None:
    kmock.objects[resource("nodes"), None, name] = {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
        "spec": {"providerID": f"openstack://{region}/{server_id or uuid.uuid4()}", "unschedulable": unschedulable},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}],
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def put_service(kmock: Any, name: str, ports: tuple[tuple[str, int, int], ...] = (("TCP", 80, 30080),),
                **spec: Any) -> str:
    uid = str(uuid.uuid4())
    kmock.objects[resource("services"), "default", name] = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default", "uid": uid, "annotations": {}},
        "spec": {"type": "LoadBalancer", "ports": [
            {"name": f"p{port}", "protocol": proto, "port": port, "nodePort": node_port}
            for proto, port, node_port in ports], **spec},
        "status": {}}
    return uid


def service(kmock: Any, name: str) -> dict | None:
    key = (resource("services"), "default", name)
    if key not in kmock.objects or kmock.objects[key].deleted:
        return None
    return dict(kmock.objects[key].raw)


def events_of(kmock: Any, name: str) -> list[tuple[str, str, str]]:
    return [(e.raw["type"], e.raw["reason"], e.raw["message"]) for (res, _, _), e in kmock.objects.items()
            if res == resource("events") and not e.deleted and e.raw["involvedObject"]["name"] == name]


# --- OpenStack side -------------------------------------------------------------------------

def existing_service(kmock: Any, name: str) -> dict:
    """The Service, which the test expects to exist."""
    found = service(kmock, name)
    assert found is not None, f"no Service {name}"
    return found


def lb_name(world: LBWorld, svc: str) -> str:
    return f"kube_service_{world.tag}_default_{svc}"


def lb_tree(world: LBWorld, region: str, name: str) -> dict[str, Any] | None:
    """The load balancer named ``name`` in ``region`` as plain data, or None."""
    octavia = world.octavia(region)
    found = list(octavia.load_balancers(name=name))
    if not found:
        return None
    assert len(found) == 1, found
    lb = octavia.get_load_balancer(found[0].id)
    listeners = {}
    for ref in lb.listeners:
        listener = octavia.get_listener(ref["id"])
        pool = octavia.get_pool(listener.default_pool_id)
        members = sorted((m.address, m.protocol_port, m.subnet_id, m.provisioning_status)
                         for m in octavia.members(pool))
        monitor = octavia.get_health_monitor(pool.health_monitor_id) if pool.health_monitor_id else None
        listeners[(listener.protocol, listener.protocol_port)] = {
            "pool": (pool.protocol, pool.lb_algorithm), "members": members,
            **({"allowed_cidrs": sorted(listener.allowed_cidrs)} if listener.allowed_cidrs else {}),
            "monitor": (monitor.type, monitor.delay) if monitor else None}
    return {"id": lb.id, "status": lb.provisioning_status, "vip_subnet": lb.vip_subnet_id,
            "description": lb.description, "listeners": listeners}


def members(world: LBWorld, region: str, *pairs: tuple[str, int]) -> list[tuple[str, int, str, str]]:
    return sorted((ip, port, world.subnets[region], "ACTIVE") for ip, port in pairs)


# --- tests ----------------------------------------------------------------------------------

@pytest.mark.asyncio
async def test_region_one_service_lifecycle_touches_only_its_own(kmock: Any, lbworld: LBWorld) -> None:
    name = f"{lbworld.tag}-one"
    put_node(kmock, "r1-a", "RegionOne", "10.130.0.11")
    put_node(kmock, "r1-b", "RegionOne", "10.130.0.12")
    uid = put_service(kmock, name, (("TCP", 80, 30080), ("UDP", 53, 30053)))
    # Not ours, and must survive: a hand-made load balancer, and one in RegionTwo that even
    # carries our name (made by someone else: its description is not ours).
    hand = lbworld.octavia("RegionOne").create_load_balancer(
        name=f"{lbworld.tag}-by-hand", vip_subnet_id=lbworld.subnets["RegionOne"])
    impostor = lbworld.octavia("RegionTwo").create_load_balancer(
        name=lb_name(lbworld, name), description="made by hand", vip_subnet_id=lbworld.subnets["RegionTwo"])
    ctl = controller(kmock, lbworld)

    outcome = (await in_thread(ctl.sync))[f"default/{name}"]
    assert not outcome.failed, outcome
    tree = await in_thread(lambda: lb_tree(lbworld, "RegionOne", lb_name(lbworld, name)))
    assert tree is not None and tree["status"] == "ACTIVE"
    assert tree["vip_subnet"] == lbworld.subnets["RegionOne"]
    assert tree["description"].startswith(f"isthmus-ccm uid={uid} ")
    assert tree["listeners"] == {
        ("TCP", 80): {"pool": ("TCP", "ROUND_ROBIN"), "monitor": ("TCP", 5),
                      "members": members(lbworld, "RegionOne", ("10.130.0.11", 30080), ("10.130.0.12", 30080))},
        ("UDP", 53): {"pool": ("UDP", "ROUND_ROBIN"), "monitor": ("UDP-CONNECT", 5),
                      "members": members(lbworld, "RegionOne", ("10.130.0.11", 30053), ("10.130.0.12", 30053))},
    }
    svc = service(kmock, name)
    assert svc is not None and svc["metadata"]["finalizers"] == ["service.kubernetes.io/load-balancer-cleanup"]
    assert svc["status"]["loadBalancer"]["ingress"] == [{"ip": VIP}]
    assert any(e[1] == "EnsuredLoadBalancer" for e in events_of(kmock, name))
    # RegionOne only: RegionTwo holds nothing of ours (the impostor is untouched)
    two = await in_thread(lambda: lb_tree(lbworld, "RegionTwo", lb_name(lbworld, name)))
    assert two is not None and two["id"] == impostor.id and two["listeners"] == {}

    # A node goes NotReady, another joins: members follow, the load balancer stays
    put_node(kmock, "r1-b", "RegionOne", "10.130.0.12", ready=False)
    put_node(kmock, "r1-c", "RegionOne", "10.130.0.13")
    await in_thread(ctl.sync)
    tree2 = await in_thread(lambda: lb_tree(lbworld, "RegionOne", lb_name(lbworld, name)))
    assert tree2 is not None and tree2["id"] == tree["id"]
    assert tree2["listeners"][("TCP", 80)]["members"] == members(
        lbworld, "RegionOne", ("10.130.0.11", 30080), ("10.130.0.13", 30080))
    assert tree2["listeners"][("UDP", 53)]["members"] == members(
        lbworld, "RegionOne", ("10.130.0.11", 30053), ("10.130.0.13", 30053))

    # Deleted: ours goes (cascade), then the finalizer; nothing else is touched
    await in_thread(lambda: core_api(kmock).delete_namespaced_service(name, "default"))
    assert service(kmock, name) is not None  # held by the finalizer until the cloud is clean
    await in_thread(ctl.sync)
    assert service(kmock, name) is None
    assert await in_thread(lambda: lb_tree(lbworld, "RegionOne", lb_name(lbworld, name))) is None
    assert any(e[1] == "DeletedLoadBalancer" for e in events_of(kmock, name))
    survivors = await in_thread(lambda: (lbworld.octavia("RegionOne").get_load_balancer(hand.id),
                                         lbworld.octavia("RegionTwo").get_load_balancer(impostor.id)))
    assert [s.id for s in survivors] == [hand.id, impostor.id]


@pytest.mark.asyncio
async def test_nodes_in_both_regions_get_a_load_balancer_in_each(kmock: Any, lbworld: LBWorld) -> None:
    name = f"{lbworld.tag}-both"
    put_node(kmock, "b-one", "RegionOne", "10.130.0.21")
    put_node(kmock, "b-two-a", "RegionTwo", "10.131.0.21")
    put_node(kmock, "b-two-b", "RegionTwo", "10.131.0.22")
    put_service(kmock, name)
    ctl = controller(kmock, lbworld)
    outcome = (await in_thread(ctl.sync))[f"default/{name}"]
    assert not outcome.failed, outcome
    for region, pairs in (("RegionOne", [("10.130.0.21", 30080)]),
                          ("RegionTwo", [("10.131.0.21", 30080), ("10.131.0.22", 30080)])):
        tree = await in_thread(functools.partial(lb_tree, lbworld, region, lb_name(lbworld, name)))
        assert tree is not None and tree["status"] == "ACTIVE", region
        assert tree["vip_subnet"] == lbworld.subnets[region]
        assert tree["listeners"][("TCP", 80)]["members"] == members(lbworld, region, *pairs), region
    assert existing_service(kmock, name)["status"]["loadBalancer"]["ingress"] == [{"ip": VIP}]  # one VIP, both regions'

    # RegionOne's only node leaves: RegionOne's load balancer goes, RegionTwo's stays
    await in_thread(lambda: core_api(kmock).delete_node("b-one"))
    await in_thread(ctl.sync)
    assert await in_thread(lambda: lb_tree(lbworld, "RegionOne", lb_name(lbworld, name))) is None
    assert await in_thread(lambda: lb_tree(lbworld, "RegionTwo", lb_name(lbworld, name))) is not None

    await in_thread(lambda: core_api(kmock).delete_namespaced_service(name, "default"))
    await in_thread(ctl.sync)
    assert service(kmock, name) is None
    for region in REGIONS:
        assert await in_thread(functools.partial(lb_tree, lbworld, region, lb_name(lbworld, name))) is None


@pytest.mark.asyncio
async def test_source_ranges_in_every_region_and_a_cordoned_region_keeps_its_load_balancer(
        kmock: Any, lbworld: LBWorld) -> None:
    """Issue 26 items 9 and 10, on the Octavia sandbox: listeners allow exactly
    spec.loadBalancerSourceRanges in each region; cordoning (and partitioning) every
    node of one region keeps its load balancer, emptied, and the Service's address."""
    name = f"{lbworld.tag}-ranges"
    put_node(kmock, "r-one", "RegionOne", "10.130.0.31")
    put_node(kmock, "r-two", "RegionTwo", "10.131.0.31")
    put_service(kmock, name, loadBalancerSourceRanges=["10.9.0.0/16"])
    ctl = controller(kmock, lbworld)
    outcome = (await in_thread(ctl.sync))[f"default/{name}"]
    assert not outcome.failed, outcome
    before = {}
    for region in REGIONS:
        tree = await in_thread(functools.partial(lb_tree, lbworld, region, lb_name(lbworld, name)))
        assert tree is not None and tree["listeners"][("TCP", 80)]["allowed_cidrs"] == ["10.9.0.0/16"], region
        before[region] = tree["id"]
    ingress = existing_service(kmock, name)["status"]["loadBalancer"]["ingress"]
    put_node(kmock, "r-one", "RegionOne", "10.130.0.31", ready=False, unschedulable=True)
    outcome = (await in_thread(ctl.sync))[f"default/{name}"]
    assert not outcome.failed, outcome
    tree = await in_thread(functools.partial(lb_tree, lbworld, "RegionOne", lb_name(lbworld, name)))
    assert tree is not None and tree["id"] == before["RegionOne"]
    assert tree["listeners"][("TCP", 80)]["members"] == []
    assert existing_service(kmock, name)["status"]["loadBalancer"]["ingress"] == ingress
    await in_thread(lambda: core_api(kmock).delete_namespaced_service(name, "default"))
    await in_thread(ctl.sync)
    for node in ("r-one", "r-two"):
        await in_thread(functools.partial(core_api(kmock).delete_node, node))


@pytest.mark.asyncio
async def test_managed_security_group_opens_node_ports_on_member_ports_and_goes_with_the_service(
        kmock: Any, lbworld: LBWorld, tmp_path: Path) -> None:
    """Issue 26 item 10, manage-security-groups: a group opening the NodePorts from the
    member subnet, on the member nodes' ports (found by the providerID's server id)."""
    name = f"{lbworld.tag}-sg"
    network = lbworld.sandbox.connect("RegionOne").network
    subnet = network.get_subnet(lbworld.subnets["RegionOne"])
    servers = [str(uuid.uuid4()) for _ in range(2)]
    ports = [network.create_port(network_id=subnet.network_id, device_id=vm, name=f"{name}-{i}")
             for i, vm in enumerate(servers)]
    conf = tmp_path / "cloud.conf"
    managed = "[LoadBalancer]\nmanage-security-groups = true\n"
    conf.write_text(lbworld.conf.read_text().replace("[LoadBalancer]\n", managed, 1))
    ctl = controller(kmock, LBWorld(lbworld.tag, lbworld.sandbox, lbworld.subnets, conf))
    group_name = f"lb-sg-{lb_name(lbworld, name)}"

    def groups_of(port_id: str) -> list[str]:
        return list(network.get_port(port_id).security_group_ids)

    try:
        for i, (vm, port) in enumerate(zip(servers, ports, strict=True)):
            put_node(kmock, f"sg-{i}", "RegionOne", port.fixed_ips[0]["ip_address"], server_id=vm)
        put_service(kmock, name, (("TCP", 80, 30080), ("UDP", 53, 30053)))
        outcome = (await in_thread(ctl.sync))[f"default/{name}"]
        assert not outcome.failed, outcome
        (group,) = await in_thread(lambda: list(network.security_groups(name=group_name)))
        rules = {(r["protocol"], r["port_range_min"], r["port_range_max"], r["remote_ip_prefix"])
                 for r in group.security_group_rules if r["direction"] == "ingress"}
        assert rules == {("tcp", 30080, 30080, subnet.cidr), ("udp", 30053, 30053, subnet.cidr)}
        for port in ports:
            assert group.id in await in_thread(functools.partial(groups_of, port.id))

        await in_thread(lambda: core_api(kmock).delete_node("sg-1"))  # no member any more: off its port
        assert not (await in_thread(ctl.sync))[f"default/{name}"].failed
        assert group.id not in await in_thread(functools.partial(groups_of, ports[1].id))
        assert group.id in await in_thread(functools.partial(groups_of, ports[0].id))

        await in_thread(lambda: core_api(kmock).delete_namespaced_service(name, "default"))
        await in_thread(ctl.sync)
        assert service(kmock, name) is None
        assert await in_thread(lambda: list(network.security_groups(name=group_name))) == []
        assert group.id not in await in_thread(functools.partial(groups_of, ports[0].id))
    finally:
        def clean_up() -> None:
            for node in ("sg-0", "sg-1"):
                with contextlib.suppress(Exception):  # sg-1 is gone already
                    core_api(kmock).delete_node(node)
            for port in ports:
                network.delete_port(port.id, ignore_missing=True)
            for leftover in network.security_groups(name=group_name):
                network.delete_security_group(leftover.id, ignore_missing=True)

        await in_thread(clean_up)  # kmock answers on this event loop: never block it


def sandbox_service(action: str, state_dir: Path, name: str) -> None:
    subprocess.run([str(BIN / "isthmus"), "sandbox", action, name, "--state-dir", str(state_dir)],
                   check=True, capture_output=True, text=True, timeout=300)


@pytest.mark.asyncio
@pytest.mark.exclusive
async def test_region_two_octavia_down_deletes_nothing_and_converges_after(kmock: Any, lbworld: LBWorld) -> None:
    name = f"{lbworld.tag}-outage"
    put_node(kmock, "o-one", "RegionOne", "10.130.0.31")
    put_node(kmock, "o-two", "RegionTwo", "10.131.0.31")
    put_service(kmock, name)
    ctl = controller(kmock, lbworld)
    assert not (await in_thread(ctl.sync))[f"default/{name}"].failed
    before = await in_thread(lambda: lb_tree(lbworld, "RegionTwo", lb_name(lbworld, name)))
    assert before is not None

    state_dir = lbworld.sandbox.state_dir
    sandbox_service("stop", state_dir, "octavia-api-RegionTwo")
    try:
        # nodes change in both regions while RegionTwo's Octavia is away
        put_node(kmock, "o-one-b", "RegionOne", "10.130.0.32")
        put_node(kmock, "o-two-b", "RegionTwo", "10.131.0.32")
        outcome = (await in_thread(ctl.sync))[f"default/{name}"]
        assert list(outcome.failed) == ["RegionTwo"], outcome
        tree = await in_thread(lambda: lb_tree(lbworld, "RegionOne", lb_name(lbworld, name)))
        assert tree is not None
        assert tree["listeners"][("TCP", 80)]["members"] == members(
            lbworld, "RegionOne", ("10.130.0.31", 30080), ("10.130.0.32", 30080))
        warnings = [e for e in events_of(kmock, name) if e[0] == "Warning"]
        assert any(e[1] == "SyncLoadBalancerFailed" and "region RegionTwo" in e[2] for e in warnings), warnings
        assert existing_service(kmock, name)["status"]["loadBalancer"]["ingress"] == [{"ip": VIP}]

        # deleted while RegionTwo is away: RegionOne is cleaned, the finalizer holds the Service
        await in_thread(lambda: core_api(kmock).delete_namespaced_service(name, "default"))
        outcome = (await in_thread(ctl.sync))[f"default/{name}"]
        assert list(outcome.failed) == ["RegionTwo"] and not outcome.finalizer_removed
        assert await in_thread(lambda: lb_tree(lbworld, "RegionOne", lb_name(lbworld, name))) is None
        svc = service(kmock, name)
        assert svc is not None and svc["metadata"]["finalizers"] == ["service.kubernetes.io/load-balancer-cleanup"]
        assert any("Error deleting load balancer in region RegionTwo" in e[2] for e in events_of(kmock, name))
    finally:
        sandbox_service("restart", state_dir, "octavia-api-RegionTwo")

    # back: the load balancer was never deleted during the outage; now it is, and the finalizer goes
    def region_two_answers() -> Any:
        for _ in range(60):
            try:
                return lb_tree(lbworld, "RegionTwo", lb_name(lbworld, name))
            except Exception:  # noqa: BLE001 - still starting
                time.sleep(1)
        raise AssertionError("octavia-api-RegionTwo did not come back")

    still = await in_thread(region_two_answers)
    assert still is not None and still["id"] == before["id"]
    outcome = (await in_thread(ctl.sync))[f"default/{name}"]
    assert not outcome.failed and outcome.finalizer_removed, outcome
    assert service(kmock, name) is None
    assert await in_thread(lambda: lb_tree(lbworld, "RegionTwo", lb_name(lbworld, name))) is None


@pytest.mark.asyncio
async def test_isthmus_ccm_process_runs_the_service_controller(kmock: Any, lbworld: LBWorld, tmp_path: Path) -> None:
    """The console script, as the Deployment runs it: the service controller is wired in."""
    import os
    import signal


    kubeconfig = write_kubeconfig(kmock, tmp_path / "kubeconfig")
    name = f"{lbworld.tag}-proc"
    put_node(kmock, "p-one", "RegionOne", "10.130.0.41")
    put_service(kmock, name)
    log = tmp_path / "ccm.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(BIN / "isthmus-ccm"), "--cloud-config", str(lbworld.conf),
                                 "--kubeconfig", str(kubeconfig), "--identity", "test-ccm",
                                 "--cluster-name", lbworld.tag, "--service-sync-period", "1"],
                                stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ))
    try:
        for _ in range(240):
            svc = service(kmock, name)
            if (svc or {}).get("status", {}).get("loadBalancer", {}).get("ingress") or proc.poll() is not None:
                break
            await asyncio.sleep(0.5)
        assert proc.poll() is None, log.read_text()
        assert existing_service(kmock, name)["status"]["loadBalancer"]["ingress"] == [{"ip": VIP}], log.read_text()
        tree = await in_thread(lambda: lb_tree(lbworld, "RegionOne", lb_name(lbworld, name)))
        assert tree is not None and tree["listeners"][("TCP", 80)]["members"] == members(
            lbworld, "RegionOne", ("10.130.0.41", 30080))
        await in_thread(lambda: core_api(kmock).delete_namespaced_service(name, "default"))
        for _ in range(240):
            if service(kmock, name) is None:
                break
            await asyncio.sleep(0.5)
        assert service(kmock, name) is None, log.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert await in_thread(lambda: lb_tree(lbworld, "RegionOne", lb_name(lbworld, name))) is None
