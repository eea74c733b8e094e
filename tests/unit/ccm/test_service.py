"""The service loop: queue work stops as soon as the replica is no longer the leader."""

from __future__ import annotations

import asyncio
from typing import Any

import kmock
import pytest

from isthmus.ccm.controllers.lifecycle import LifecycleController
from isthmus.ccm.controllers.node import NodeController
from isthmus.ccm.kube.informer import Informer, NodeCache, WorkQueue
from isthmus.ccm.kube.nodes import TAINT_UNINITIALIZED, NodeAPI
from isthmus.ccm.openstack.instances import Instances
from isthmus.ccm.openstack.model import Server
from isthmus.ccm.service import Manager, Periods
from tests.kmock_clients import core_api

from .fakes import FakeClients, FakeRegion

pytestmark = pytest.mark.component  # a Kubernetes API (kmock) or HTTP servers in threads (tests/tiers.py)

NODES = kmock.resource("", "v1", "nodes")
UNINIT = {"key": TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule"}


@pytest.mark.asyncio
async def test_queue_work_stops_when_leadership_is_lost(kmock: Any) -> None:
    names = [f"node-{i}" for i in range(4)]
    for name in names:
        kmock.objects[NODES, None, name] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                                            "spec": {"taints": [UNINIT]}, "status": {}}
    fakes = FakeClients({"R": FakeRegion("R", [Server(f"i-{n}", n, "ACTIVE", "az", {"original_name": "m1"})
                                                for n in names])})
    nodes = NodeAPI(core_api(kmock))
    inst = Instances(fakes, ("R",), environ={})
    leading = iter([True, True])  # two nodes' worth of leadership, then lost
    cache, queue = NodeCache(), WorkQueue()
    manager = Manager(cache, queue, NodeController(nodes, inst), LifecycleController(nodes, inst), Periods(),
                      active=lambda: next(leading, False))
    await asyncio.to_thread(Informer(nodes, cache, queue.add).relist)
    assert len(queue) == 4
    await asyncio.to_thread(manager.drain)
    initialised = [n for n in names if not kmock.objects[NODES, None, n].raw["spec"]["taints"]]
    assert initialised == names[:2]
    lookups = [arg for _, op, arg in fakes.calls() if op == "find_servers"]
    assert lookups == names[:2]
    assert len(queue) == 2  # the rest waits for whoever leads next


@pytest.mark.asyncio
async def test_periodic_passes_stop_when_leadership_is_lost(kmock: Any) -> None:
    names = [f"node-{i}" for i in range(4)]
    for name in names:  # NotReady: each costs a lookup in the lifecycle pass
        kmock.objects[NODES, None, name] = {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "spec": {"providerID": f"openstack:///i-{name}"},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    fakes = FakeClients({"R": FakeRegion("R", [Server(f"i-{n}", n, "ACTIVE", "az", {"original_name": "m1"})
                                                for n in names])})
    nodes = NodeAPI(core_api(kmock))
    inst = Instances(fakes, ("R",), environ={})
    leading = iter([True, True])
    cache, queue = NodeCache(), WorkQueue()
    manager = Manager(cache, queue, NodeController(nodes, inst), LifecycleController(nodes, inst), Periods(),
                      active=lambda: next(leading, False))
    await asyncio.to_thread(Informer(nodes, cache, queue.add).relist)
    await asyncio.to_thread(manager.step)
    assert [arg for _, op, arg in fakes.calls()] == ["i-node-0", "i-node-1"]  # the address pass did not start
