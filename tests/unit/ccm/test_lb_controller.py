"""The service controller against kmock (official client over HTTP) and fake Octavias."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import kmock
import pytest

from isthmus.ccm.controllers.service import ServiceController
from isthmus.ccm.kube.services import ServiceAPI
from isthmus.ccm.openstack.loadbalancer import model as m
from isthmus.ccm.openstack.loadbalancer.options import LoadBalancerConfig
from tests.kmock_clients import core_api

from .lbfakes import FakeOctavia, FakeOctaviaRegions

pytestmark = pytest.mark.component  # a Kubernetes API (kmock) or HTTP servers in threads (tests/tiers.py)

SERVICES = kmock.resource("", "v1", "services")
NODES = kmock.resource("", "v1", "nodes")
EVENTS = kmock.resource("", "v1", "events")
REGIONS = ("RegionOne", "RegionTwo")
CONFIG = LoadBalancerConfig(default={"subnet_id": "sub"})
LB = "kube_service_kubernetes_default_web"
T = TypeVar("T")


async def in_thread(fn: Callable[[], T]) -> T:
    return await asyncio.to_thread(fn)


def api(server: Any) -> ServiceAPI:
    return ServiceAPI(core_api(server))


def put_node(server: Any, name: str, region: str, ip: str, ready: bool = True, labels: dict | None = None) -> None:
    server.objects[NODES, None, name] = {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
        "spec": {"providerID": f"openstack://{region}/{name}"},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def put_service(server: Any, name: str = "web", type_: str = "LoadBalancer", annotations: dict | None = None,
                uid: str = "uid-web", **spec: Any) -> None:
    server.objects[SERVICES, "default", name] = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default", "uid": uid, "annotations": annotations or {}},
        "spec": {"type": type_, "ports": [{"name": "http", "protocol": "TCP", "port": 80, "nodePort": 30080}],
                 **spec},
        "status": {}}


def service(server: Any, name: str = "web") -> dict:
    return dict(server.objects[SERVICES, "default", name].raw)


def events(server: Any) -> list[tuple[str, str, str]]:
    return [(e.raw["type"], e.raw["reason"], e.raw["message"]) for (res, _, _), e in server.objects.items()
            if res == EVENTS and not e.deleted]


def controller(server: Any, octavias: dict[str, FakeOctavia], **kw: Any) -> ServiceController:
    return ServiceController(api(server), FakeOctaviaRegions(octavias), CONFIG, REGIONS, sleep=lambda _: None, **kw)


@pytest.fixture
def octavias() -> dict[str, FakeOctavia]:
    return {r: FakeOctavia(r) for r in REGIONS}


@pytest.mark.asyncio
async def test_ensure_places_per_region_sets_status_finalizer_and_events(
        kmock: Any, octavias: dict[str, FakeOctavia]) -> None:
    put_node(kmock, "a1", "RegionOne", "10.0.0.1")
    put_node(kmock, "b1", "RegionTwo", "10.1.0.1")
    put_node(kmock, "b2", "RegionTwo", "10.1.0.2", labels={m.LABEL_EXCLUDE: ""})
    put_service(kmock, annotations={"loadbalancer.openstack.org/x-forwarded-for": "true"})
    put_service(kmock, "plain", type_="ClusterIP", uid="uid-plain")
    put_service(kmock, "other-class", uid="uid-oc", loadBalancerClass="example.com/lb")
    ctl = controller(kmock, octavias)
    outcomes = await in_thread(ctl.sync)
    assert list(outcomes) == ["default/web"]
    svc = service(kmock)
    assert svc["metadata"]["finalizers"] == [m.FINALIZER]
    assert svc["status"]["loadBalancer"]["ingress"] == [{"ip": "10.9.0.1"}]  # both fakes' VIPs are the same
    assert octavias["RegionOne"].tree()[LB][("TCP", 80)]["members"] == [("10.0.0.1", 30080)]
    assert octavias["RegionTwo"].tree()[LB][("TCP", 80)]["members"] == [("10.1.0.1", 30080)]
    assert "finalizers" not in service(kmock, "other-class")["metadata"]
    seen = events(kmock)
    assert ("Warning", "UnsupportedAnnotation",
            "annotations not supported by isthmus-ccm, ignored: loadbalancer.openstack.org/x-forwarded-for") in seen
    assert ("Normal", "EnsuringLoadBalancer", "Ensuring load balancer in RegionOne, RegionTwo") in seen
    assert any(e[:2] == ("Normal", "EnsuredLoadBalancer") for e in seen)

    # a quiet pass does nothing at all; a node change re-converges members only
    writes = {r: len(o.writes) for r, o in octavias.items()}
    assert await in_thread(ctl.sync) == {}
    assert {r: len(o.writes) for r, o in octavias.items()} == writes
    assert len(events(kmock)) == len(seen)  # and repeats no event
    put_node(kmock, "a2", "RegionOne", "10.0.0.2")
    await in_thread(ctl.sync)
    assert octavias["RegionOne"].tree()[LB][("TCP", 80)]["members"] == [("10.0.0.1", 30080), ("10.0.0.2", 30080)]
    assert len(octavias["RegionTwo"].writes) == writes["RegionTwo"]

    # Issue 26 item 9: RegionTwo's last node goes NotReady (a WAN partition): its pool
    # empties, its load balancer (and address) stays
    put_node(kmock, "b1", "RegionTwo", "10.1.0.1", ready=False)
    await in_thread(ctl.sync)
    assert len(octavias["RegionTwo"].lbs) == 1 and len(octavias["RegionOne"].lbs) == 1
    assert octavias["RegionTwo"].tree()[LB][("TCP", 80)]["members"] == []
    assert service(kmock)["status"]["loadBalancer"]["ingress"] == [{"ip": "10.9.0.1"}]
    # RegionTwo has no node at all any more: the cluster left it, its load balancer goes
    del kmock.objects[NODES, None, "b1"]
    del kmock.objects[NODES, None, "b2"]
    await in_thread(ctl.sync)
    assert octavias["RegionTwo"].lbs == {} and len(octavias["RegionOne"].lbs) == 1


@pytest.mark.asyncio
async def test_deletion_removes_ours_then_the_finalizer(kmock: Any, octavias: dict[str, FakeOctavia]) -> None:
    put_node(kmock, "a1", "RegionOne", "10.0.0.1")
    put_node(kmock, "b1", "RegionTwo", "10.1.0.1")
    put_service(kmock)
    ctl = controller(kmock, octavias)
    await in_thread(ctl.sync)
    hand_made = octavias["RegionOne"].create_load_balancer(_hand_made())
    await in_thread(lambda: api(kmock).core.delete_namespaced_service("web", "default"))
    assert service(kmock)["metadata"].get("deletionTimestamp")  # held by our finalizer
    await in_thread(ctl.sync)
    assert (SERVICES, "default", "web") not in kmock.objects or kmock.objects[SERVICES, "default", "web"].deleted
    assert list(octavias["RegionOne"].lbs) == [hand_made.id] and octavias["RegionTwo"].lbs == {}
    assert any(e[:2] == ("Normal", "DeletedLoadBalancer") for e in events(kmock))


def _hand_made() -> Any:
    from isthmus.ccm.openstack.loadbalancer.plan import DesiredLB

    return DesiredLB("RegionOne", "someone-elses", "by hand", "sub", "", "", "", "", "", (), "", False, "")


@pytest.mark.asyncio
async def test_region_down_keeps_finalizer_and_names_it(kmock: Any, octavias: dict[str, FakeOctavia]) -> None:
    put_node(kmock, "a1", "RegionOne", "10.0.0.1")
    put_node(kmock, "b1", "RegionTwo", "10.1.0.1")
    put_service(kmock)
    ctl = controller(kmock, octavias)
    await in_thread(ctl.sync)
    octavias["RegionTwo"].down = True
    # a node change while RegionTwo is down: RegionOne converges, RegionTwo is reported, old ingress kept
    put_node(kmock, "a2", "RegionOne", "10.0.0.2")
    put_node(kmock, "b2", "RegionTwo", "10.1.0.2")
    outcome = (await in_thread(ctl.sync))["default/web"]
    assert list(outcome.failed) == ["RegionTwo"]
    assert octavias["RegionOne"].tree()[LB][("TCP", 80)]["members"] == [("10.0.0.1", 30080), ("10.0.0.2", 30080)]
    warnings = [e for e in events(kmock) if e[1] == "SyncLoadBalancerFailed"]
    assert warnings and all("region RegionTwo" in e[2] for e in warnings)
    # the Service is deleted while RegionTwo is down: RegionOne is cleaned, the finalizer stays
    await in_thread(lambda: api(kmock).core.delete_namespaced_service("web", "default"))
    await in_thread(ctl.sync)
    assert octavias["RegionOne"].lbs == {} and len(octavias["RegionTwo"].lbs) == 1
    assert service(kmock)["metadata"]["finalizers"] == [m.FINALIZER]
    assert any("Error deleting load balancer in region RegionTwo" in e[2] for e in events(kmock))
    octavias["RegionTwo"].down = False
    await in_thread(ctl.sync)  # failed passes are retried on the next pass
    assert octavias["RegionTwo"].lbs == {}
    assert kmock.objects[SERVICES, "default", "web"].deleted


@pytest.mark.asyncio
async def test_type_changed_away_cleans_up(kmock: Any, octavias: dict[str, FakeOctavia]) -> None:
    put_node(kmock, "a1", "RegionOne", "10.0.0.1")
    put_service(kmock)
    ctl = controller(kmock, octavias)
    await in_thread(ctl.sync)
    assert octavias["RegionOne"].lbs
    kmock.objects[SERVICES, "default", "web"].patch({"spec": {"type": "ClusterIP"}})
    await in_thread(ctl.sync)
    svc = service(kmock)
    assert octavias["RegionOne"].lbs == {}
    assert not svc["metadata"].get("finalizers") and svc["status"]["loadBalancer"]["ingress"] == []


@pytest.mark.asyncio
async def test_no_nodes_changes_nothing(kmock: Any, octavias: dict[str, FakeOctavia]) -> None:
    put_node(kmock, "a1", "RegionOne", "10.0.0.1")
    put_service(kmock)
    ctl = controller(kmock, octavias)
    await in_thread(ctl.sync)
    put_node(kmock, "a1", "RegionOne", "10.0.0.1", ready=False)
    await in_thread(ctl.sync)
    assert len(octavias["RegionOne"].lbs) == 1  # a transient empty node set tears nothing down
    assert any("no Ready, schedulable node" in e[2] for e in events(kmock))


@pytest.mark.asyncio
async def test_a_region_without_subnet_keeps_its_load_balancer(kmock: Any, octavias: dict[str, FakeOctavia]) -> None:
    put_node(kmock, "a1", "RegionOne", "10.0.0.1")
    put_service(kmock)
    await in_thread(controller(kmock, octavias).sync)
    broken = ServiceController(api(kmock), FakeOctaviaRegions(octavias), LoadBalancerConfig(), REGIONS,
                               sleep=lambda _: None)  # subnet-id lost from cloud.conf
    await in_thread(broken.sync)
    assert len(octavias["RegionOne"].lbs) == 1
    assert any("no subnet-id or network-id" in e[2] for e in events(kmock))


@pytest.mark.asyncio
async def test_other_class_with_the_standard_finalizer_is_never_touched(
        kmock: Any, octavias: dict[str, FakeOctavia]) -> None:
    put_node(kmock, "a1", "RegionOne", "10.0.0.1")
    put_service(kmock, uid="uid-x", loadBalancerClass="example.com/lb")
    kmock.objects[SERVICES, "default", "web"].patch({"metadata": {"finalizers": [m.FINALIZER]}})
    await in_thread(lambda: api(kmock).core.delete_namespaced_service("web", "default"))
    assert await in_thread(controller(kmock, octavias).sync) == {}
    assert service(kmock)["metadata"]["finalizers"] == [m.FINALIZER]  # the other controller's to remove


@pytest.mark.asyncio
async def test_pass_stops_when_leadership_is_lost(kmock: Any, octavias: dict[str, FakeOctavia]) -> None:
    put_node(kmock, "a1", "RegionOne", "10.0.0.1")
    put_service(kmock)
    leader = [False]
    ctl = controller(kmock, octavias, active=lambda: leader[0])
    assert await in_thread(ctl.sync) == {} and octavias["RegionOne"].writes == []
    leader[0] = True
    assert list(await in_thread(ctl.sync)) == ["default/web"]


@pytest.mark.asyncio
async def test_a_region_without_octavia_blocks_nothing(kmock: Any) -> None:
    only_one = {"RegionOne": FakeOctavia("RegionOne")}  # RegionTwo has no load-balancer endpoint
    put_node(kmock, "a1", "RegionOne", "10.0.0.1")
    put_service(kmock)
    ctl = controller(kmock, only_one)
    assert not (await in_thread(ctl.sync))["default/web"].failed
    await in_thread(lambda: api(kmock).core.delete_namespaced_service("web", "default"))
    assert (await in_thread(ctl.sync))["default/web"].finalizer_removed
    assert only_one["RegionOne"].lbs == {}


def test_enabled_false_does_not_start_the_service_controller() -> None:
    import threading

    from isthmus.ccm.config import parse_config
    from isthmus.ccm.controllers.service import start_service_controller
    from isthmus.ccm.service import build_parser

    args = build_parser().parse_args(["--cloud-config", "x", "--cluster-name", "prod"])
    assert (args.cluster_name, args.service_sync_period) == ("prod", 10.0)
    config = parse_config("[Global]\nregion = RegionOne\n[LoadBalancer]\nenabled = false\n")
    assert start_service_controller(args, config, None, None, lambda: True, threading.Event()) is None
