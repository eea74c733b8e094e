"""Node Events through the official client against kmock: reasons, deduplication, counts."""

from __future__ import annotations

import asyncio
from typing import Any

import kmock
import pytest

from isthmus.ccm.controllers.lifecycle import LifecycleController
from isthmus.ccm.controllers.node import NodeController
from isthmus.ccm.kube.events import COMPONENT, NodeEvents
from isthmus.ccm.kube.informer import Backoff
from isthmus.ccm.kube.nodes import TAINT_UNINITIALIZED, NodeAPI
from isthmus.ccm.openstack.instances import Instances
from isthmus.ccm.openstack.model import Server
from tests.kmock_clients import core_api

from .fakes import FakeClients, FakeRegion

pytestmark = pytest.mark.component  # a Kubernetes API (kmock) or HTTP servers in threads (tests/tiers.py)

NODES = kmock.resource("", "v1", "nodes")
EVENTS = kmock.resource("", "v1", "events")
UNINIT = {"key": TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule"}


def events_of(server: Any) -> list[dict]:
    return sorted((dict(o.raw) for (res, _, _), o in server.objects.items() if res == EVENTS and not o.deleted),
                  key=lambda e: e["metadata"]["name"])


@pytest.mark.asyncio
async def test_lookup_failed_is_written_once_then_counted_then_synced(kmock: Any) -> None:
    kmock.objects[NODES, None, "n2"] = {"apiVersion": "v1", "kind": "Node",
                                        "metadata": {"name": "n2", "uid": "u-2"}, "spec": {"taints": [UNINIT]}}
    one = FakeRegion("RegionOne", down=True)
    two = FakeRegion("RegionTwo", [Server("i-2", "n2", "ACTIVE", "az", {"original_name": "m1"})])
    fakes = FakeClients({"RegionOne": one, "RegionTwo": two})
    core = core_api(kmock)
    nodes = NodeAPI(core)
    now = [0.0]
    written: list[str] = []
    events = NodeEvents(core, instance="ccm-0", repeat_after=300, clock=lambda: now[0], on_written=written.append)
    ctl = NodeController(nodes, Instances(fakes, ("RegionOne", "RegionTwo"), environ={}),
                         Backoff(clock=lambda: now[0]), events)

    def fail(times: int) -> None:
        for _ in range(times):
            now[0] += 10
            ctl.sync(nodes.list())

    await asyncio.to_thread(fail, 5)  # five failed retries: one Event
    (event,) = events_of(kmock)
    assert event["reason"] == "LookupFailed" and event["type"] == "Warning" and event["count"] == 1
    assert "region RegionOne:" in event["message"]
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "n2", "uid": "u-2"}
    assert event["source"] == {"component": COMPONENT, "host": "ccm-0"}
    assert event["metadata"]["namespace"] == "default"
    now[0] += 300
    await asyncio.to_thread(fail, 1)  # past repeat_after: the same Event counts all six
    (event,) = events_of(kmock)
    assert event["count"] == 6
    one.down = False
    await asyncio.to_thread(fail, 1)
    synced = [e for e in events_of(kmock) if e["reason"] == "Synced"]
    assert len(synced) == 1 and synced[0]["type"] == "Normal" and "RegionTwo" in synced[0]["message"]
    assert written == ["LookupFailed", "LookupFailed", "Synced"]


@pytest.mark.asyncio
async def test_deleting_node_event(kmock: Any) -> None:
    kmock.objects[NODES, None, "gone"] = {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "gone"},
        "spec": {"providerID": "openstack://R/i-gone"},
        "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    core = core_api(kmock)
    nodes = NodeAPI(core)
    ctl = LifecycleController(nodes, Instances(FakeClients({"R": FakeRegion("R")}), ("R",), environ={}),
                              events=NodeEvents(core))
    await asyncio.to_thread(lambda: ctl.monitor(nodes.list()))
    (event,) = events_of(kmock)
    assert (event["reason"], event["involvedObject"]["name"]) == ("DeletingNode", "gone")
    assert await asyncio.to_thread(nodes.list) == []


def test_event_failures_never_fail_the_work() -> None:
    class Broken:
        def create_namespaced_event(self, *args: Any, **kwargs: Any) -> None:
            raise OSError("API server away")

    from isthmus.ccm.kube.nodes import NodeView

    NodeEvents(Broken()).node_event(NodeView("n", "", {}, {}, (), (), True, ""), "Warning", "LookupFailed", "x")
