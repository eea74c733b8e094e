"""The service controller watches Services and reads Nodes from the node cache.

* the Service informer (the Node informer's loop, keyed ``namespace/name``),
  scripted, then over HTTP against kmock;
* what queues what: a Service change queues that Service only, a change of
  the Nodes' load-balancer view queues every LoadBalancer Service (spaced by
  ``--service-sync-period``), a Node change the load balancers do not see
  queues nothing;
* every ``ServiceAPI`` request carries ``_request_timeout``;
* the wiring of isthmus-ccm against kmock: after the first LIST of Services
  and of Nodes, an unchanged world costs no LIST (and no Octavia write), and
  a Service created after start gets its load balancer promptly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import kmock
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from isthmus.ccm.config import parse_config
from isthmus.ccm.controllers.service import (
    OctaviaRegions,
    Outcome,
    ServiceAPI,
    ServiceCache,
    ServiceController,
    start_service_controller,
)
from isthmus.ccm.kube.informer import Informer, NodeCache, WatchSettings
from isthmus.ccm.kube.nodes import NodeAPI, NodeView, WatchEvent
from isthmus.ccm.openstack.loadbalancer import model as m
from isthmus.ccm.openstack.loadbalancer.options import LoadBalancerConfig
from isthmus.ccm.openstack.model import NodeAddress
from isthmus.ccm.service import build_parser
from tests.kmock_clients import core_api

from .lbfakes import FakeOctavia, FakeOctaviaRegions
from .test_informer import ScriptedAPI

SERVICES = kmock.resource("", "v1", "services")
NODES = kmock.resource("", "v1", "nodes")
REGIONS = ("RegionOne", "RegionTwo")


def svc(name: str, rv: str = "1", type_: str = "LoadBalancer", namespace: str = "default",
        annotations: dict | None = None, **kw: Any) -> m.ServiceView:
    return m.ServiceView(namespace, name, f"uid-{namespace}-{name}", type_,
                         (m.ServicePort("http", "TCP", 80, 30080),), annotations or {}, resource_version=rv, **kw)


def node(name: str, rv: str = "1", region: str = "RegionOne", ip: str = "10.0.0.1", ready: bool = True,
         labels: dict | None = None, taints: tuple = ()) -> NodeView:
    return NodeView(name, f"openstack://{region}/i-{name}", labels or {}, {}, taints,
                    (NodeAddress("InternalIP", ip),), ready, rv)


# --- the Service informer, scripted (test_informer's ScriptedAPI serves any resource) -----------

def test_service_informer_keys_by_namespace_and_relists_only_on_gone() -> None:
    stop = threading.Event()
    api = ScriptedAPI(
        lists=[[svc("web"), svc("web", namespace="other")], [svc("web", "20"), svc("web", namespace="other")]],
        watches=[
            [WatchEvent("MODIFIED", svc("web", "5"), "5"),  # our own status write, say: rv only
             WatchEvent("MODIFIED", svc("web", "6", annotations={"a": "b"}), "6"),
             WatchEvent("BOOKMARK", None, "7")],
            [WatchEvent("MODIFIED", svc("web", "8", namespace="other", deleting=True), "8"),
             WatchEvent("DELETED", svc("web", "9", namespace="other", deleting=True), "9")],
            ApiException(status=410, reason="Gone"),
        ],
        stop=stop)
    cache = ServiceCache()
    changed: list[str] = []
    restarts: list[str] = []
    Informer(api, cache, changed.append, WatchSettings(error_backoff=0.01), on_restart=restarts.append,
             kind="service").run(stop)
    assert api.calls == [("list", "list-0"), ("watch", "list-0"), ("watch", "7"), ("watch", "9"),
                         ("list", "list-4"), ("watch", "list-4")]
    assert restarts == ["expired", "expired", "gone", "expired"]
    # both "web"s are distinct; the rv-only write queues nothing; the relist brings other/web back
    # and web's annotation is gone again
    assert changed == ["default/web", "other/web", "default/web", "other/web", "other/web",
                       "default/web", "other/web"]
    assert [s.key for s in cache.list()] == ["default/web", "other/web"]


def test_node_view_carries_what_the_load_balancers_read() -> None:
    from isthmus.ccm.kube.nodes import node_view

    def v1(unschedulable: bool | None, ready: str = "True", rv: str = "1") -> Any:
        return client.V1Node(
            metadata=client.V1ObjectMeta(name="n", labels={m.LABEL_EXCLUDE: ""}, resource_version=rv),
            spec=client.V1NodeSpec(provider_id="openstack://RegionTwo/i-n", unschedulable=unschedulable),
            status=client.V1NodeStatus(addresses=[client.V1NodeAddress(type="InternalIP", address="10.1.0.9")],
                                       conditions=[client.V1NodeCondition(type="Ready", status=ready)]))

    cordoned = node_view(v1(True))
    assert m.lb_node_from_view(cordoned) == m.lb_node(v1(True)) == m.LBNode(
        "n", "RegionTwo", "10.1.0.9", True, True, True, server_id="i-n")
    assert m.lb_node_from_view(node_view(v1(None))) == m.lb_node(v1(None))
    assert node_view(v1(True, rv="2")).same_content(cordoned)  # a heartbeat
    assert not node_view(v1(None, rv="2")).same_content(cordoned)  # uncordoned: a change
    assert not node_view(v1(True, ready="False", rv="2")).same_content(cordoned)


def test_service_view_same_content_ignores_only_the_resource_version() -> None:
    assert svc("a", "2").same_content(svc("a", "1"))
    assert not svc("a", "2", ingress=({"ip": "1.2.3.4"},)).same_content(svc("a", "1"))
    assert not svc("a", "2").same_content(None)


# --- what queues what -------------------------------------------------------------------------

@dataclasses.dataclass
class Recording(ServiceController):
    """The controller's queueing and dedupe, with the convergence itself recorded."""

    converged: list[str] = dataclasses.field(default_factory=list)

    def reconcile(self, service: m.ServiceView, nodes: Any) -> Outcome:
        self.converged.append(service.key)
        return Outcome()


def wired(now: list[float], spacing: float = 10.0) -> tuple[Recording, NodeCache, ServiceCache]:
    nodes, services = NodeCache(), ServiceCache()
    # No Kubernetes API and no Octavia: Recording converges without them.
    ctl = Recording(cast(ServiceAPI, None), cast(OctaviaRegions, None), LoadBalancerConfig(), REGIONS,
                    services=services, nodes=nodes, node_pass_spacing=spacing, clock=lambda: now[0])
    ctl.queue.clock = ctl.queue.backoff.clock = ctl.clock
    return ctl, nodes, services


def feed(cache: Any, handler: Any, event: WatchEvent) -> None:
    """What the informer does with one event."""
    key = cache.apply(event)
    if key is not None:
        handler(key)


def test_a_service_change_queues_that_service_and_a_node_change_every_load_balancer() -> None:
    now = [0.0]
    ctl, nodes, services = wired(now)
    for key in services.replace([svc("a"), svc("b"), svc("plain", type_="ClusterIP")]):
        ctl.service_changed(key)
    assert len(ctl.queue) == 2  # the ClusterIP Service is not even queued
    for name in nodes.replace([node("n1")]):
        ctl.node_changed(name)
    ctl.step()
    assert sorted(ctl.converged) == ["default/a", "default/b"]
    ctl.converged.clear()
    now[0] = 1.0
    assert ctl.step() == 0 and ctl.converged == []  # a quiet world: nothing queued, nothing done

    # a Service changes: that Service only
    feed(services, ctl.service_changed, WatchEvent("MODIFIED", svc("b", "2", annotations={"x": "y"}), "2"))
    assert len(ctl.queue) == 1
    ctl.step()
    assert ctl.converged == ["default/b"]
    ctl.converged.clear()
    feed(services, ctl.service_changed, WatchEvent("MODIFIED", svc("b", "3", annotations={"x": "y"}), "3"))
    assert len(ctl.queue) == 0  # a resourceVersion-only write (our status patch, say) queues nothing

    # a Node joins: every LoadBalancer Service, not the ClusterIP one
    now[0] = 20.0
    feed(nodes, ctl.node_changed, WatchEvent("ADDED", node("n2", ip="10.0.0.2"), "4"))
    ctl.step()
    assert sorted(ctl.converged) == ["default/a", "default/b"]
    ctl.converged.clear()

    # a Node change the load balancers do not see (a taint): nothing
    now[0] = 40.0
    feed(nodes, ctl.node_changed, WatchEvent("MODIFIED", node("n2", "5", ip="10.0.0.2",
                                                              taints=({"key": "k", "effect": "NoSchedule"},)), "5"))
    assert ctl.step() == 0 and ctl.converged == []

    # each field the members depend on counts, alone: readiness, cordon, exclusion label, address, region
    baseline = node("n2", ip="10.0.0.2")
    rv = iter(range(6, 100))
    for changed in (node("n2", ip="10.0.0.2", ready=False), dataclasses.replace(baseline, unschedulable=True),
                    node("n2", ip="10.0.0.2", labels={m.LABEL_EXCLUDE: ""}), node("n2", ip="10.0.0.3"),
                    node("n2", ip="10.0.0.2", region="RegionTwo"), baseline):
        for view in (changed, baseline):
            now[0] += 20.0
            version = str(next(rv))
            feed(nodes, ctl.node_changed, WatchEvent("MODIFIED", dataclasses.replace(view, resource_version=version),
                                                     version))
            ctl.step()
            expected = [] if changed is baseline else ["default/a", "default/b"]
            assert sorted(ctl.converged) == expected, view
            ctl.converged.clear()


def test_node_churn_is_spaced_by_the_sync_period() -> None:
    now = [0.0]
    ctl, nodes, services = wired(now, spacing=10.0)
    services.replace([svc("a")])
    nodes.replace([node("n1")])
    ctl.step()
    assert ctl.converged == ["default/a"]
    ctl.converged.clear()
    now[0] = 3.0  # 3 s after the first pass: a Node joins
    feed(nodes, ctl.node_changed, WatchEvent("ADDED", node("n2", ip="10.0.0.2"), "2"))
    assert ctl.step() == 0  # coalesced: not before 10 s after the last node pass
    now[0] = 10.0
    ctl.step()
    assert ctl.converged == ["default/a"]


def test_a_failure_retries_with_backoff_and_a_deleting_service_is_cleaned_from_the_cache(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    ctl, nodes, services = wired(now)
    ctl.queue.backoff.base = 5.0
    nodes.replace([node("n1")])
    services.replace([svc("a")])
    calls: list[str] = []

    def reconcile(service: m.ServiceView, _nodes: Any) -> Outcome:
        calls.append("cleanup" if service.deleting else "ensure")
        return Outcome(failed={"RegionTwo": "503"}) if len(calls) == 1 else Outcome()

    monkeypatch.setattr(ctl, "reconcile", reconcile)
    ctl.step()
    assert calls == ["ensure"] and len(ctl.queue) == 1  # waiting for its backoff
    now[0] = 4.0
    assert ctl.step() == 0
    now[0] = 5.0
    ctl.step()
    assert calls == ["ensure", "ensure"]
    # deleted with our finalizer: still in the cache with a deletionTimestamp, so it is cleaned up
    feed(services, ctl.service_changed,
         WatchEvent("MODIFIED", svc("a", "3", finalizers=(m.FINALIZER,), deleting=True), "3"))
    ctl.step()
    assert calls == ["ensure", "ensure", "cleanup"]
    feed(services, ctl.service_changed, WatchEvent("DELETED", svc("a", "4", deleting=True), "4"))
    assert ctl.step() == 1 and calls == ["ensure", "ensure", "cleanup"]  # gone: forgotten, nothing to do


def test_the_pass_waits_for_both_caches_and_for_the_lease() -> None:
    now = [0.0]
    ctl, nodes, services = wired(now)
    services.replace([svc("a")])
    assert ctl.step() == 0 and ctl.converged == []  # no Node LIST yet: "no Ready node" would be a lie
    nodes.replace([node("n1")])
    leader = [False]
    ctl.active = lambda: leader[0]
    assert ctl.step() == 0 and ctl.converged == []
    leader[0] = True
    ctl.step()
    assert ctl.converged == ["default/a"]


# --- every ServiceAPI request has a timeout ---------------------------------------------------

class RecordingCore:
    """A CoreV1Api stand-in: records each call's keyword arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            return SimpleNamespace(items=[], metadata=SimpleNamespace(resource_version="1"))
        call.__name__ = name
        return call


def test_every_service_api_request_passes_request_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    import kubernetes.watch

    core = RecordingCore()

    class FakeWatch:
        def stream(self, func: Any, *args: Any, **kwargs: Any) -> Iterator[dict]:
            core.calls.append((f"{func.__name__} (watch)", kwargs))
            return iter([])

        def stop(self) -> None:
            pass

    monkeypatch.setattr(kubernetes.watch, "Watch", FakeWatch)
    api = ServiceAPI(core, timeout=7.0)
    view = svc("web")
    exercised = {
        "list_with_version": lambda: api.list_with_version(),
        "list_services": lambda: api.list_services(),
        "list_nodes": lambda: api.list_nodes(),
        "watch": lambda: list(api.watch("5", 300, 60.0)),
        "patch": lambda: api.patch(view, {"metadata": {}}),
        "patch_status": lambda: api.patch_status(view, []),
        "event": lambda: api.event(view, "Normal", "R", "m"),
        "stop_watch": lambda: api.stop_watch(),  # no request
    }
    public = {n for n, f in inspect.getmembers(ServiceAPI, inspect.isfunction) if not n.startswith("_")}
    assert public == set(exercised), "a new ServiceAPI method needs its case here"
    for run in exercised.values():
        run()
    assert {name for name, _ in core.calls} == {
        "list_service_for_all_namespaces", "list_node", "list_service_for_all_namespaces (watch)",
        "patch_namespaced_service", "patch_namespaced_service_status", "create_namespaced_event"}
    for name, kwargs in core.calls:
        expected = (7.0, 60.0) if name.endswith("(watch)") else 7.0
        assert kwargs.get("_request_timeout") == expected, (name, kwargs)


# --- the service controller as isthmus-ccm wires it, against kmock ---------------------------

def put_node(server: Any, name: str, region: str, ip: str) -> None:
    server.objects[NODES, None, name] = {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "spec": {"providerID": f"openstack://{region}/{name}"},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}],
                   "conditions": [{"type": "Ready", "status": "True"}]}}


def new_service(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "protocol": "TCP", "port": 80,
                                                         "nodePort": 30080}]}}


@pytest.mark.component  # watches against kmock (tests/tiers.py)
@pytest.mark.asyncio
async def test_unchanged_world_costs_no_list_after_the_first(kmock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import isthmus.ccm.openstack.loadbalancer.octavia as octavia_module

    octavias = {r: FakeOctavia(r) for r in REGIONS}
    monkeypatch.setattr(octavia_module, "OctaviaClients", lambda *a: FakeOctaviaRegions(octavias))
    put_node(kmock, "a1", "RegionOne", "10.0.0.1")
    kmock.objects[SERVICES, "default", "early"] = new_service("early")
    core = core_api(kmock)
    args = build_parser().parse_args(["--cloud-config", "x", "--kube-api-timeout", "5",
                                      "--service-sync-period", "0.2"])
    config = parse_config("[Global]\nregion = RegionOne\nregions = RegionTwo\n[LoadBalancer]\nsubnet-id = sub\n")
    assert config.regions == REGIONS
    node_cache = NodeCache()
    node_informer = Informer(NodeAPI(core, timeout=5.0), node_cache, lambda name: None,
                             WatchSettings(read_timeout=0.3))  # kmock never ends a watch
    stop = threading.Event()
    started = start_service_controller(args, config, None, core, lambda: True, stop, node_cache=node_cache,
                                       node_informer=node_informer, watch_settings=WatchSettings(read_timeout=0.3))
    assert started is not None and started.controller.api.timeout == 5.0  # --kube-api-timeout, threaded through

    def ingress(name: str) -> list:
        raw = kmock.objects[SERVICES, "default", name]
        return ((dict(raw.raw).get("status") or {}).get("loadBalancer") or {}).get("ingress") or []

    def members(name: str) -> list[str]:
        tree = octavias["RegionOne"].tree().get(f"kube_service_kubernetes_default_{name}") or {}
        return [address for address, _ in (tree.get(("TCP", 80)) or {}).get("members", [])]

    def wait_for(what: Any) -> bool:
        for _ in range(200):
            if what():
                return True
            stop.wait(0.05)
        return False

    def scenario() -> tuple[int, int]:
        node_thread = threading.Thread(target=node_informer.run, args=(stop,))
        node_thread.start()
        try:
            assert wait_for(lambda: ingress("early")), "the first pass did not come promptly"
            # created after start: only the watch can see it
            core.create_namespaced_service("default", new_service("late"), _request_timeout=5)
            assert wait_for(lambda: ingress("late")), "a new Service was not handled promptly"
            put_node(kmock, "a2", "RegionOne", "10.0.0.2")  # a Node joins: every Service's members follow
            assert wait_for(lambda: all(members(lb) == ["10.0.0.1", "10.0.0.2"] for lb in ("early", "late"))), \
                "a new Node did not reach the members"
            writes = sum(len(o.writes) for o in octavias.values())
            stop.wait(1.0)  # a quiet second: idle watches resumed, node passes due, nothing to do
            return writes, sum(len(o.writes) for o in octavias.values())
        finally:
            stop.set()
            node_informer.stop()
            node_thread.join(10)
            started.worker.join(10)
            for thread in started.informers:
                thread.join(10)

    before, after = await asyncio.to_thread(scenario)
    assert after == before  # the quiet second cost no Octavia write
    requests = [r for r in kmock if r.resource in (SERVICES, NODES)]
    lists = [(r.resource, r.action) for r in requests if r.action == kmock.action.LIST]
    watches = [r for r in requests if r.action == kmock.action.WATCH]
    assert sorted(str(res.plural) for res, _ in lists) == ["nodes", "services"], lists  # one each, at start
    assert {str(r.resource.plural) for r in watches} == {"nodes", "services"}
    assert len([r for r in watches if r.resource == SERVICES]) >= 2  # idle streams resumed without a LIST
    assert not started.worker.is_alive()
