"""/healthz, /readyz and /metrics: scraped over HTTP after known work."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any, cast

import pytest
from keystoneauth1 import exceptions as ksa_exc
from openstack import exceptions as sdk_exc
from openstack.compute.v2.server import Server as SdkServer
from prometheus_client.parser import text_string_to_metric_families

from isthmus.ccm.controllers.lifecycle import LifecycleController
from isthmus.ccm.controllers.node import NodeController
from isthmus.ccm.errors import RegionError
from isthmus.ccm.health import Health, HealthServer, Metrics
from isthmus.ccm.kube.informer import Backoff, NodeCache, WorkQueue
from isthmus.ccm.kube.nodes import TAINT_UNINITIALIZED, NodeAPI, NodeView
from isthmus.ccm.openstack.clients import OpenStackRegionClient, RegionBreaker
from isthmus.ccm.openstack.instances import Instances
from isthmus.ccm.service import Manager, Periods

from .fakes import FakeClients, FakeRegion
from .test_clients import Raises, Stub, conn

pytestmark = pytest.mark.component  # a Kubernetes API (kmock) or HTTP servers in threads (tests/tiers.py)

UNINIT = {"key": TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule"}


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_after_known_work() -> None:
    metrics = Metrics()
    now = [100.0]

    def clock() -> float:  # every reading later than the last: a call starts after the answers before it
        now[0] += 0.001
        return now[0]

    breaker = RegionBreaker(cooldown=30, clock=clock)
    replies: list[Any] = [SdkServer.existing(id="i", name="n"), sdk_exc.NotFoundException("404"),
                          sdk_exc.HttpException("500 boom", http_status=500), ksa_exc.ConnectTimeout("slow")]

    def get_server(server_id: str) -> Any:
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            return Raises(reply)(server_id)
        return reply

    region = OpenStackRegionClient("RegionTwo", conn(Stub(get_server=get_server)), breaker, metrics.openstack_call)
    assert region.get_server("i") is not None
    assert region.get_server("gone") is None
    for _ in range(3):  # 500, timeout (pauses the region), then refused at once
        try:
            region.get_server("x")
        except RegionError:
            pass

    # a Node whose region is down: one failed reconcile; a healthy one: one good reconcile
    frozen = lambda: 0.0  # noqa: E731 - "bad" must not come back from its backoff during the drain
    cache, queue = NodeCache(), WorkQueue(Backoff(clock=frozen), clock=frozen)
    fakes = FakeClients({"R": FakeRegion("R", down=True)})
    inst = Instances(fakes, ("R",), environ={})
    no_api = cast(NodeAPI, None)  # never reached: the region is down before any Node write
    manager = Manager(cache, queue, NodeController(no_api, inst), LifecycleController(no_api, inst),
                      Periods(), observer=metrics)
    for name in cache.replace([NodeView("bad", "", {}, {}, (UNINIT,), (), True, "1"),
                               NodeView("fine", "", {}, {}, (), (), True, "1")]):
        queue.add(name)
    manager.drain()
    metrics.watch_restarted("expired")
    metrics.watch_restarted("gone")
    metrics.bind(lambda: len(queue), lambda: len(cache), lambda: True,
                 lambda: {r: breaker.is_open(r) for r in ("RegionOne", "RegionTwo")})

    server = HealthServer(Health(lambda: manager.last_beat, cache.synced.is_set, lambda: True), metrics,
                          "127.0.0.1", 0)
    port = server.start()
    try:
        code, text = get(port, "/metrics")
    finally:
        server.stop()
    assert code == 200
    got = samples(text)
    for result, count in (("ok", 2), ("error", 1), ("timeout", 1), ("paused", 1)):
        assert got["isthmus_ccm_openstack_requests_total", (("region", "RegionTwo"), ("result", result))] == count
    assert got["isthmus_ccm_openstack_request_duration_seconds_count", (("region", "RegionTwo"),)] == 4
    assert got["isthmus_ccm_region_paused", (("region", "RegionOne"),)] == 0
    assert got["isthmus_ccm_region_paused", (("region", "RegionTwo"),)] == 1
    assert got["isthmus_ccm_reconcile_duration_seconds_count", (("controller", "node"),)] == 2
    assert got["isthmus_ccm_reconcile_errors_total", (("controller", "node"),)] == 1
    assert got["isthmus_ccm_workqueue_depth", ()] == 1  # "bad" backs off
    assert got["isthmus_ccm_nodes_cached", ()] == 2
    assert got["isthmus_ccm_leader", ()] == 1
    assert got["isthmus_ccm_kube_watch_restarts_total", (("reason", "expired"),)] == 1
    assert got["isthmus_ccm_kube_watch_restarts_total", (("reason", "gone"),)] == 1
    now[0] += 31  # the pause ends by itself
    assert samples(metrics.render().decode())["isthmus_ccm_region_paused", (("region", "RegionTwo"),)] == 0


def test_probes() -> None:
    now = [0.0]
    beat = [0.0]
    synced = [False]
    alive = [True]
    health = Health(lambda: beat[0], lambda: synced[0], lambda: alive[0], stall_after=60, clock=lambda: now[0])
    server = HealthServer(health, Metrics(), "127.0.0.1", 0)
    port = server.start()
    try:
        assert get(port, "/healthz") == (200, "ok\n")
        assert get(port, "/readyz") == (503, "node cache not synced yet\n")
        synced[0] = True
        assert get(port, "/readyz") == (200, "ok\n")
        now[0] = 61  # the loop is stuck
        code, why = get(port, "/healthz")
        assert code == 503 and "no progress for 61s" in why
        assert get(port, "/readyz")[0] == 503
        beat[0] = 61
        assert get(port, "/healthz")[0] == 200
        alive[0] = False  # the informer thread died
        assert get(port, "/healthz")[0] == 503
        assert get(port, "/nope")[0] == 404
    finally:
        server.stop()
