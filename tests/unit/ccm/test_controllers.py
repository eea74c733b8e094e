"""Controllers against the kmock Kubernetes emulator, through the official client.

The cloud side is the in-memory RegionClient fake (the search logic has its
own tests); what is tested here is what the controllers do to Nodes and
Leases over real HTTP with ``kubernetes.client``.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import kmock
import pytest
from kubernetes import client

from isthmus.ccm.config import NetworkingOptions
from isthmus.ccm.controllers.lifecycle import LifecycleController
from isthmus.ccm.controllers.node import NodeController, apply_provided_node_ips
from isthmus.ccm.kube.informer import Backoff, Informer, NodeCache, WatchSettings, WorkQueue
from isthmus.ccm.kube.nodes import TAINT_SHUTDOWN, TAINT_UNINITIALIZED, NodeAPI
from isthmus.ccm.openstack.instances import Instances
from isthmus.ccm.openstack.model import NodeAddress, Server, ServerAddress
from isthmus.ccm.service import Manager, Periods, run
from isthmus.kube.leader import LeaseElector
from tests.kmock_clients import api_client

from .fakes import FakeClients, FakeRegion

pytestmark = pytest.mark.component  # a Kubernetes API (kmock) or HTTP servers in threads (tests/tiers.py)

NODES = kmock.resource("", "v1", "nodes")
T = TypeVar("T")
REGIONS = ("RegionOne", "RegionTwo")


async def in_thread(fn: Callable[[], T]) -> T:
    # The kubernetes client blocks; kmock serves on this event loop.
    return await asyncio.to_thread(fn)


def node(name: str, provider_id: str = "", ready: bool | None = None, taints: list[dict] | None = None,
         labels: dict | None = None, annotations: dict | None = None, addresses: list[dict] | None = None) -> dict:
    status: dict[str, Any] = {"addresses": addresses or []}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    spec: dict[str, Any] = {"taints": taints or []}
    if provider_id:
        spec["providerID"] = provider_id
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
            "spec": spec, "status": status}


UNINIT = {"key": TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule"}
OTHER = {"key": "example.com/dedicated", "value": "gpu", "effect": "NoSchedule"}


def cloud() -> FakeClients:
    one = FakeRegion("RegionOne", [
        Server("i-1", "node-1", "ACTIVE", "nova", {"original_name": "m1.small"},
               {"net": (ServerAddress("10.1.0.5", "fixed"),)}),
        Server("i-off", "node-off", "SHUTOFF", "nova", {"original_name": "m1.small"}),
    ])
    two = FakeRegion("RegionTwo", [
        Server("i-2", "node-2", "ACTIVE", "az 2", {"original_name": "m1.large"},
               {"net": (ServerAddress("10.2.0.5", "fixed"),)}),
    ])
    return FakeClients({"RegionOne": one, "RegionTwo": two})


def instances(fakes: FakeClients, regional: bool = True) -> Instances:
    return Instances(fakes, REGIONS, NetworkingOptions(), environ={"OS_CCM_REGIONAL": "true" if regional else ""})


def obj(server: Any, name: str) -> dict:
    return dict(server.objects[NODES, None, name].raw)


@pytest.mark.asyncio
async def test_initialise_nodes(kmock: Any) -> None:
    hostname = {"type": "Hostname", "address": "node-2.local"}
    kmock.objects[NODES, None, "node-1"] = node("node-1", "/i-1", taints=[UNINIT, OTHER])
    kmock.objects[NODES, None, "node-2"] = node("node-2", taints=[UNINIT], addresses=[hostname])
    kmock.objects[NODES, None, "plain"] = node("plain")  # no taint: not looked up
    fakes = cloud()
    nodes = NodeAPI(client.CoreV1Api(api_client(kmock)))
    ctl = NodeController(nodes, instances(fakes))
    await in_thread(lambda: ctl.sync(nodes.list()))

    n1 = obj(kmock, "node-1")
    assert n1["spec"]["providerID"] == "/i-1"  # kubelet's value is never replaced
    assert n1["spec"]["taints"] == [OTHER]
    assert n1["metadata"]["labels"] == {
        "topology.kubernetes.io/region": "RegionOne", "failure-domain.beta.kubernetes.io/region": "RegionOne",
        "topology.kubernetes.io/zone": "nova", "failure-domain.beta.kubernetes.io/zone": "nova",
        "node.kubernetes.io/instance-type": "m1.small", "beta.kubernetes.io/instance-type": "m1.small",
    }
    assert n1["status"]["addresses"] == [{"type": "InternalIP", "address": "10.1.0.5"}]

    n2 = obj(kmock, "node-2")
    assert n2["spec"]["providerID"] == "openstack://RegionTwo/i-2"
    assert n2["spec"]["taints"] == []
    assert n2["metadata"]["labels"]["topology.kubernetes.io/zone"] == "az-2"
    assert n2["status"]["addresses"] == [{"type": "InternalIP", "address": "10.2.0.5"}, hostname]
    assert not any(arg == "plain" for _, _, arg in fakes.calls())


@pytest.mark.asyncio
async def test_initialisation_failure_keeps_taint_and_backs_off(kmock: Any) -> None:
    kmock.objects[NODES, None, "node-2"] = node("node-2", taints=[UNINIT])
    fakes = cloud()
    fakes.regions["RegionOne"].down = True  # searched first, by name: an error, not "try RegionTwo"
    now = [0.0]
    nodes = NodeAPI(client.CoreV1Api(api_client(kmock)))
    ctl = NodeController(nodes, instances(fakes), Backoff(clock=lambda: now[0]))
    await in_thread(lambda: ctl.sync(nodes.list()))
    assert obj(kmock, "node-2")["spec"]["taints"] == [UNINIT]
    assert "providerID" not in obj(kmock, "node-2")["spec"]
    calls = len(fakes.calls())
    await in_thread(lambda: ctl.sync(nodes.list()))
    assert len(fakes.calls()) == calls  # backing off
    fakes.regions["RegionOne"].down = False
    now[0] += 1.0
    await in_thread(lambda: ctl.sync(nodes.list()))
    assert obj(kmock, "node-2")["spec"]["providerID"] == "openstack://RegionTwo/i-2"


@pytest.mark.asyncio
async def test_provided_node_ip_must_match(kmock: Any) -> None:
    ann = {"alpha.kubernetes.io/provided-node-ip": "192.0.2.1"}
    kmock.objects[NODES, None, "node-1"] = node("node-1", taints=[UNINIT], annotations=ann)
    nodes = NodeAPI(client.CoreV1Api(api_client(kmock)))
    await in_thread(lambda: NodeController(nodes, instances(cloud())).sync(nodes.list()))
    assert obj(kmock, "node-1")["spec"]["taints"] == [UNINIT]


def test_apply_provided_node_ips() -> None:
    i1, i2, e1 = NodeAddress("InternalIP", "10.0.0.1"), NodeAddress("InternalIP", "10.0.0.2"), NodeAddress(
        "ExternalIP", "1.2.3.4")
    assert apply_provided_node_ips([i1, e1, i2], "10.0.0.2") == [i2, e1]
    assert apply_provided_node_ips([i1, e1, i2], " ") == [i1, e1, i2]


@pytest.mark.asyncio
async def test_lifecycle(kmock: Any) -> None:
    shut = {"key": TAINT_SHUTDOWN, "effect": "NoSchedule"}
    kmock.objects[NODES, None, "gone"] = node("gone", "openstack://RegionOne/i-deleted", ready=False)
    kmock.objects[NODES, None, "off"] = node("off", "openstack://RegionOne/i-off", ready=False)
    kmock.objects[NODES, None, "back"] = node("back", "openstack://RegionOne/i-1", ready=True, taints=[shut, OTHER])
    kmock.objects[NODES, None, "unsure"] = node("unsure", "openstack:///i-elsewhere", ready=False)
    kmock.objects[NODES, None, "foreign"] = node("foreign", "aws:///i-x", ready=False)
    kmock.objects[NODES, None, "unknown-region"] = node("unknown-region", "openstack://RegionNine/i", ready=False)
    kmock.objects[NODES, None, "bare-metal"] = node("bare-metal", ready=None)  # no providerID, no server
    fakes = cloud()
    fakes.regions["RegionTwo"].down = True
    nodes = NodeAPI(client.CoreV1Api(api_client(kmock)))
    ctl = LifecycleController(nodes, instances(fakes))
    await in_thread(lambda: ctl.monitor(nodes.list()))

    names = await in_thread(lambda: sorted(n.name for n in nodes.list()))
    assert names == ["back", "bare-metal", "foreign", "off", "unknown-region", "unsure"]  # only "gone" deleted
    off = obj(kmock, "off")["spec"]["taints"]
    assert [t["key"] for t in off] == [TAINT_SHUTDOWN] and off[0]["effect"] == "NoSchedule"
    assert obj(kmock, "back")["spec"]["taints"] == [OTHER]
    # Ready nodes cost no cloud call
    assert not any(arg == "i-1" for _, _, arg in fakes.calls())

    # the server starts again and the node turns Ready: the taint goes
    kmock.objects[NODES, None, "off"].patch({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    await in_thread(lambda: ctl.monitor(nodes.list()))
    assert obj(kmock, "off")["spec"]["taints"] == []


@pytest.mark.asyncio
async def test_lifecycle_may_delete_nameless_when_asked(kmock: Any) -> None:
    kmock.objects[NODES, None, "ghost"] = node("ghost", ready=False)
    nodes = NodeAPI(client.CoreV1Api(api_client(kmock)))
    ctl = LifecycleController(nodes, instances(cloud()), delete_without_provider_id=True)
    await in_thread(lambda: ctl.monitor(nodes.list()))
    assert await in_thread(lambda: [n.name for n in nodes.list()]) == []


@pytest.mark.asyncio
async def test_address_resync(kmock: Any) -> None:
    kmock.objects[NODES, None, "node-1"] = node("node-1", "openstack://RegionOne/i-1",
                                                addresses=[{"type": "InternalIP", "address": "10.9.9.9"}])
    fakes = cloud()
    nodes = NodeAPI(client.CoreV1Api(api_client(kmock)))
    ctl = NodeController(nodes, instances(fakes))
    await in_thread(lambda: ctl.update_addresses(nodes.list()))
    assert obj(kmock, "node-1")["status"]["addresses"] == [{"type": "InternalIP", "address": "10.1.0.5"}]
    fakes.regions["RegionOne"].down = True  # a failed lookup keeps the old addresses
    await in_thread(lambda: ctl.update_addresses(nodes.list()))
    assert obj(kmock, "node-1")["status"]["addresses"] == [{"type": "InternalIP", "address": "10.1.0.5"}]


@pytest.mark.asyncio
async def test_leader_election(kmock: Any) -> None:
    now = [100.0]
    wall = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

    def elector(identity: str) -> LeaseElector:
        return LeaseElector(client.CoordinationV1Api(api_client(kmock)), "ccm", "kube-system", identity,
                            lease_duration=15, renew_deadline=10, clock=lambda: now[0],
                            wall_clock=lambda: wall + datetime.timedelta(seconds=now[0]))

    a, b = elector("a"), elector("b")
    assert await in_thread(a.try_acquire_or_renew) is True
    assert await in_thread(b.try_acquire_or_renew) is False
    now[0] += 5
    assert await in_thread(a.try_acquire_or_renew) is True
    assert await in_thread(b.try_acquire_or_renew) is False  # b sees no change yet: the lease is live
    now[0] += 12  # a stopped renewing: b has seen the same record for 12 s (< 15)
    assert a.is_leader() is False  # past a's renew deadline, a stops acting
    assert await in_thread(b.try_acquire_or_renew) is False
    now[0] += 4
    assert await in_thread(b.try_acquire_or_renew) is True
    lease = kmock.objects[kmock.resource("coordination.k8s.io", "v1", "leases"), "kube-system", "ccm"].raw
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
    await in_thread(b.release)
    assert b.is_leader() is False
    assert await in_thread(a.try_acquire_or_renew) is True  # released: taken at once


@pytest.mark.asyncio
async def test_service_loop_acts_only_as_leader(kmock: Any) -> None:
    kmock.objects[NODES, None, "node-1"] = node("node-1", taints=[UNINIT])
    api = api_client(kmock)
    nodes = NodeAPI(client.CoreV1Api(api))
    inst = instances(cloud())
    cache, queue = NodeCache(), WorkQueue()
    manager = Manager(cache, queue, NodeController(nodes, inst), LifecycleController(nodes, inst),
                      Periods(lease_retry=0.05))
    informer = Informer(nodes, cache, queue.add, WatchSettings(read_timeout=1.0))
    elector = LeaseElector(client.CoordinationV1Api(api), "ccm", "kube-system", "me")
    stop = threading.Event()

    def run_until_initialised() -> None:
        thread = threading.Thread(target=run, args=(manager, elector, informer, stop, 0.05))
        thread.start()
        for _ in range(100):
            if not nodes.get("node-1").has_taint(TAINT_UNINITIALIZED):
                break
            stop.wait(0.05)
        stop.set()
        thread.join(10)

    await in_thread(run_until_initialised)
    assert obj(kmock, "node-1")["spec"]["providerID"] == "openstack://RegionOne/i-1"
    lease = kmock.objects[kmock.resource("coordination.k8s.io", "v1", "leases"), "kube-system", "ccm"].raw
    assert lease["spec"].get("holderIdentity") is None and lease["spec"]["leaseDurationSeconds"] == 1  # released


def test_service_main_fails_fast_on_bad_config(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from isthmus.ccm.service import main

    conf = tmp_path / "cloud.conf"
    conf.write_text("[Global]\nauth-url=http://k/v3\n")  # no region
    assert main(["--cloud-config", str(conf)]) == 1
    assert "no region configured" in capsys.readouterr().err


def test_backoff_doubles_to_cap() -> None:
    now = [0.0]
    b = Backoff(base=1.0, cap=4.0, clock=lambda: now[0])
    assert [b.failed("n") for _ in range(4)] == [1.0, 2.0, 4.0, 4.0]
    assert not b.due("n")
    now[0] = 4.0
    assert b.due("n")
    b.succeeded("n")
    assert b.failed("n") == 1.0
