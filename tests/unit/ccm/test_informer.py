"""The Node cache, the work queue and the LIST-then-WATCH informer.

Pure logic against fakes first; then the whole service loop against kmock,
counting the LIST requests it sends: one at startup, none after.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Iterator
from typing import Any, cast

import kmock
import pytest
import urllib3.exceptions
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from isthmus.ccm.controllers.lifecycle import LifecycleController
from isthmus.ccm.controllers.node import NodeController
from isthmus.ccm.kube.informer import (
    Backoff,
    Informer,
    NodeCache,
    WatchSettings,
    WorkQueue,
    classify_watch_error,
)
from isthmus.ccm.kube.nodes import TAINT_UNINITIALIZED, NodeAPI, NodeView, WatchEvent
from isthmus.ccm.openstack.instances import Instances
from isthmus.ccm.openstack.model import Server, ServerAddress
from isthmus.ccm.service import Manager, Periods, run
from isthmus.kube.leader import LeaseElector
from tests.kmock_clients import api_client

from .fakes import FakeClients, FakeRegion


def view(name: str, rv: str = "1", ready: bool = True, taints: tuple = ()) -> NodeView:
    return NodeView(name, "", {}, {}, taints, (), ready, rv)


# --- cache ------------------------------------------------------------------------------------

def test_cache_reports_only_content_changes() -> None:
    cache = NodeCache()
    assert not cache.synced.is_set()
    assert sorted(cache.replace([view("a"), view("b")])) == ["a", "b"]
    assert cache.synced.is_set()
    # a kubelet status write bumps only the resourceVersion: nothing to do
    assert cache.apply(WatchEvent("MODIFIED", view("a", "2"), "2")) is None
    cached = cache.get("a")
    assert cached is not None and cached.resource_version == "2"
    assert cache.apply(WatchEvent("MODIFIED", view("a", "3", ready=False), "3")) == "a"
    assert cache.apply(WatchEvent("ADDED", view("c", "4"), "4")) == "c"
    assert cache.apply(WatchEvent("BOOKMARK", None, "5")) is None
    assert cache.apply(WatchEvent("DELETED", view("b", "6"), "6")) == "b"
    assert cache.apply(WatchEvent("DELETED", view("b", "6"), "6")) is None
    assert [v.name for v in cache.list()] == ["a", "c"]
    # a re-LIST: changed and vanished names only
    assert sorted(cache.replace([view("a", "7", ready=False), view("d")])) == ["c", "d"]


# --- queue ------------------------------------------------------------------------------------

def test_queue_dedupes_and_keeps_order() -> None:
    q = WorkQueue()
    for name in ("a", "b", "a", "c", "b"):
        q.add(name)
    assert len(q) == 3
    assert [q.get(), q.get(), q.get(), q.get()] == ["a", "b", "c", None]


def test_queue_backoff_doubles_and_events_do_not_cut_it_short() -> None:
    now = [0.0]
    q = WorkQueue(Backoff(base=1.0, cap=4.0, clock=lambda: now[0]), clock=lambda: now[0])
    q.add("n")
    assert q.get() == "n"
    assert q.retry("n") == 1.0
    assert len(q) == 1 and q.get() is None  # not due yet
    q.add("n")  # an event for a Node that is backing off: its retry is already scheduled
    assert q.get() is None
    now[0] = 1.0
    assert q.get() == "n"
    assert [q.retry("n"), q.retry("n"), q.retry("n")] == [2.0, 4.0, 4.0]
    q.forget("n")  # success: the backoff starts over, events queue it at once
    q.add("n")
    assert q.get() == "n"


def test_queue_get_waits_for_an_add() -> None:
    q = WorkQueue()
    threading.Timer(0.05, q.add, ("late",)).start()
    assert q.get(timeout=5.0) == "late"
    assert q.get(timeout=0.01) is None


# --- informer against a scripted NodeAPI ----------------------------------------------------

@dataclasses.dataclass
class ScriptedAPI:
    """list_with_version / watch replaying a script; each watch entry is events or an exception."""

    lists: list[list[Any]]  # NodeViews or ServiceViews
    watches: list[Any]
    stop: threading.Event
    calls: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def list_with_version(self) -> tuple[list[Any], str]:
        views = self.lists.pop(0)
        rv = f"list-{len(self.calls)}"
        self.calls.append(("list", rv))
        return views, rv

    def watch(self, rv: str, timeout_seconds: int, read_timeout: float) -> Iterator[WatchEvent]:
        self.calls.append(("watch", rv))
        assert 300 <= timeout_seconds < 600
        if not self.watches:
            self.stop.set()
            return
        step = self.watches.pop(0)
        if isinstance(step, BaseException):
            raise step
        yield from step

    def stop_watch(self) -> None:
        pass


def test_informer_resumes_without_list_and_relists_on_gone_or_error() -> None:
    stop = threading.Event()
    # urllib3 annotates the pool as required; the exception takes None, as the client's own do.
    idle = urllib3.exceptions.ReadTimeoutError(None, "/api/v1/nodes", "Read timed out.")  # type: ignore[arg-type]
    api = ScriptedAPI(
        lists=[[view("a")], [view("a"), view("b", "9")], [view("a")]],
        watches=[
            [WatchEvent("ADDED", view("b", "5"), "5"), WatchEvent("BOOKMARK", None, "6")],  # then the server ends it
            idle,  # nothing for read_timeout: resume from "6"
            ApiException(status=410, reason="Gone"),  # too old: LIST again
            [WatchEvent("MODIFIED", view("a", "10", ready=False), "10")],
            ConnectionResetError("reset"),  # an error: LIST again after the backoff
        ],
        stop=stop)
    changed: list[str] = []
    restarts: list[str] = []
    cache = NodeCache()
    informer = Informer(api, cache, changed.append, WatchSettings(error_backoff=0.01),
                        on_restart=restarts.append)
    informer.run(stop)
    assert api.calls == [("list", "list-0"), ("watch", "list-0"), ("watch", "6"), ("watch", "6"),
                         ("list", "list-4"), ("watch", "list-4"), ("watch", "10"),
                         ("list", "list-7"), ("watch", "list-7")]
    assert restarts == ["expired", "idle", "gone", "expired", "error", "expired"]
    # a: first LIST; b: ADDED; the second LIST changed nothing (b rv 9 same content);
    # a NotReady; the last LIST has a Ready again and no b
    assert changed == ["a", "b", "a", "a", "b"]
    assert [v.name for v in cache.list()] == ["a"]


def test_classify_watch_errors() -> None:
    assert classify_watch_error(ApiException(status=410)) == "gone"
    assert classify_watch_error(ApiException(status=500)) == "error"
    # urllib3 annotates the pool as required; the exception takes None.
    assert classify_watch_error(urllib3.exceptions.ReadTimeoutError(None, "/", "x")) == "idle"  # type: ignore[arg-type]
    assert classify_watch_error(OSError("refused")) == "error"


# --- the whole loop against kmock -------------------------------------------------------------

NODES = kmock.resource("", "v1", "nodes")
UNINIT = {"key": TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule"}


def new_node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {"taints": [UNINIT]}}


@pytest.mark.component  # a watch against kmock (tests/tiers.py)
@pytest.mark.asyncio
async def test_node_added_after_start_is_initialised_without_another_list(kmock: Any) -> None:
    kmock.objects[NODES, None, "early"] = new_node("early")
    fakes = FakeClients({"R": FakeRegion("R", [
        Server("i-early", "early", "ACTIVE", "az", {"original_name": "m1"}, {"n": (ServerAddress("10.0.0.1"),)}),
        Server("i-late", "late", "ACTIVE", "az", {"original_name": "m1"}, {"n": (ServerAddress("10.0.0.2"),)}),
    ])})
    api = api_client(kmock)
    core = client.CoreV1Api(api)
    nodes = NodeAPI(core, timeout=5.0)
    inst = Instances(fakes, ("R",), environ={"OS_CCM_REGIONAL": "true"})
    cache, queue = NodeCache(), WorkQueue()
    # every periodic pass due often: they must read the cache, never LIST
    manager = Manager(cache, queue, NodeController(nodes, inst), LifecycleController(nodes, inst),
                      Periods(node_monitor=0.05, node_status_update=0.05, node_resync=0.05, lease_retry=0.05))
    informer = Informer(nodes, cache, queue.add, WatchSettings(read_timeout=0.3))  # kmock never ends a watch
    elector = LeaseElector(client.CoordinationV1Api(api), "ccm", "kube-system", "me")
    stop = threading.Event()

    def spec(name: str) -> dict:
        return dict(kmock.objects[NODES, None, name].raw).get("spec", {})

    def scenario() -> None:
        thread = threading.Thread(target=run, args=(manager, elector, informer, stop, 0.05))
        thread.start()
        try:
            for _ in range(200):
                if not spec("early").get("taints"):
                    break
                stop.wait(0.05)
            assert spec("early")["providerID"] == "openstack://R/i-early"
            # after start: only a watch can see it (the client sends a plain dict as it is; its stubs want a V1Node)
            core.create_node(new_node("late"), _request_timeout=5)  # type: ignore[arg-type]
            for _ in range(200):
                if not spec("late").get("taints"):
                    break
                stop.wait(0.05)
            stop.wait(0.5)  # more periodic passes and idle watch resumptions
        finally:
            stop.set()
            thread.join(10)

    await asyncio.to_thread(scenario)
    assert spec("late")["providerID"] == "openstack://R/i-late"
    assert dict(kmock.objects[NODES, None, "late"].raw)["status"]["addresses"] == [
        {"type": "InternalIP", "address": "10.0.0.2"}]
    node_requests = [r for r in kmock if r.resource == NODES]
    lists = [r for r in node_requests if r.action == kmock.action.LIST]
    watches = [r for r in node_requests if r.action == kmock.action.WATCH]
    assert len(lists) == 1, [(r.action, r.params) for r in node_requests]
    assert len(watches) >= 2  # idle streams resumed without a LIST
    assert all(r.params.get("timeoutSeconds") and r.params.get("allowWatchBookmarks") == "true" for r in watches)


# --- the manager's schedule -------------------------------------------------------------------

@dataclasses.dataclass
class Recording:
    """Stands in for both controllers; records what the manager asked of them."""

    seen: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    fail: set[str] = dataclasses.field(default_factory=set)

    def reconcile(self, node: NodeView) -> None:
        self.seen.append(("reconcile", node.name))
        if node.name in self.fail:
            raise RuntimeError("cloud down")

    def check(self, node: NodeView) -> None:
        self.seen.append(("check", node.name))

    def update_addresses(self, views: Any) -> None:
        self.seen += [("addresses", v.name) for v in views]


def test_manager_waits_for_the_cache_and_schedules_from_it() -> None:
    now = [0.0]
    clock = lambda: now[0]  # noqa: E731 - a fake clock read by two objects
    cache, queue = NodeCache(), WorkQueue(Backoff(base=1.0, clock=clock), clock=clock)
    rec = Recording(fail={"b"})
    # The recording stand-in answers what the manager asks of both controllers.
    manager = Manager(cache, queue, cast(NodeController, rec), cast(LifecycleController, rec),
                      Periods(node_monitor=5, node_status_update=300, node_resync=60), clock=clock)
    manager.step(wait=0.01)
    assert rec.seen == []  # nothing before the first LIST is in
    cache.replace([view("a"), view("b")])
    manager.step()
    # the first step runs every pass: resync queues all, lifecycle and addresses read the cache
    assert rec.seen == [("check", "a"), ("check", "b"), ("addresses", "a"), ("addresses", "b"),
                        ("reconcile", "a"), ("reconcile", "b")]
    rec.seen.clear()
    now[0] = 1.0  # b's backoff (1 s) is over; no periodic pass is due
    manager.step()
    assert rec.seen == [("reconcile", "b")]
    rec.seen.clear()
    rec.fail.clear()
    now[0] = 2.5  # b's second backoff (2 s) is not over: an event does not cut it short
    queue.add("b")
    manager.step()
    assert rec.seen == []
    now[0] = 3.0
    manager.step()
    assert rec.seen == [("reconcile", "b")]
    rec.seen.clear()
    manager.started_leading()  # a new leader: every pass and every Node at once
    manager.step()
    assert sorted(rec.seen) == sorted([("check", "a"), ("check", "b"), ("addresses", "a"), ("addresses", "b"),
                                       ("reconcile", "a"), ("reconcile", "b")])
