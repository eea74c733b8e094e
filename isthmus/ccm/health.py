"""``/healthz``, ``/readyz`` and ``/metrics`` of ``isthmus-ccm`` on one small HTTP server.

Plain HTTP from the standard library, on its own daemon thread, so a stuck
controller loop cannot stop the probes from answering (and reporting it):

* ``/healthz`` (liveness) fails when the main loop has made no progress for
  ``stall_after`` seconds, or the informer thread died: a restart is the cure;
* ``/readyz`` succeeds once the Node cache holds a full LIST and the informer
  runs, on the leader and on a healthy standby alike;
* ``/metrics`` is the Prometheus text format of :class:`Metrics`.

Metric names are listed in docs/ccm.md.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

# Names from the module in sys.modules, not the ``http`` package's attribute, which
# eventlet's green re-import replaces where Neutron is imported too (the test suite).
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

PREFIX = "isthmus_ccm"

# OpenStack calls end in one of these (label ``result``).
OK, ERROR, TIMEOUT, PAUSED = "ok", "error", "timeout", "paused"


class _BreakerCollector:
    """``isthmus_ccm_region_paused``, read from the breaker at scrape time (a pause ends by itself)."""

    def __init__(self, paused: Callable[[], dict[str, bool]]) -> None:
        self._paused = paused

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(f"{PREFIX}_region_paused",
                                   "1 while a region's calls fail at once after a timeout (the breaker is open)",
                                   labels=["region"])
        for region, paused in sorted(self._paused().items()):
            family.add_metric([region], 1.0 if paused else 0.0)
        yield family


class Metrics:
    """Every metric of the process, on a registry of its own (tests make several)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.openstack_requests = Counter(
            f"{PREFIX}_openstack_requests", "OpenStack API calls by region and result "
            "(ok: any answer, 404 included; error; timeout; paused: refused at once by the breaker)",
            ["region", "result"], registry=r)
        self.openstack_seconds = Histogram(
            f"{PREFIX}_openstack_request_duration_seconds", "OpenStack API call latency by region",
            ["region"], registry=r)
        self.reconcile_seconds = Histogram(
            f"{PREFIX}_reconcile_duration_seconds",
            "Time to reconcile one Node (controller=service: one Service), by controller",
            ["controller"], registry=r, buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120))
        self.reconcile_errors = Counter(
            f"{PREFIX}_reconcile_errors", "Failed Node (controller=service: Service) reconciliations, by controller",
            ["controller"], registry=r)
        self.watch_restarts = Counter(
            f"{PREFIX}_kube_watch_restarts", "Node watch streams ended, by reason "
            "(expired: the server ended it; idle: read timeout; gone: 410, re-LIST; error: re-LIST)",
            ["reason"], registry=r)
        self.events = Counter(f"{PREFIX}_events", "Kubernetes Events written (created or counted up), by reason",
                              ["reason"], registry=r)
        self.service_watch_restarts = Counter(
            f"{PREFIX}_service_watch_restarts", "Service watch streams (service controller) ended, by reason "
            "(as for Nodes)", ["reason"], registry=r)
        self.service_queue_depth = Gauge(f"{PREFIX}_service_workqueue_depth", "Services waiting in the service "
                                         "controller's work queue (ready now or backing off)", registry=r)
        self.services_cached = Gauge(f"{PREFIX}_services_cached", "Services in the service controller's cache",
                                     registry=r)
        self.queue_depth = Gauge(f"{PREFIX}_workqueue_depth", "Nodes waiting in the work queue "
                                 "(ready now or backing off)", registry=r)
        self.nodes_cached = Gauge(f"{PREFIX}_nodes_cached", "Nodes in the informer cache", registry=r)
        self.leader = Gauge(f"{PREFIX}_leader", "1 while this replica holds the Lease", registry=r)

    # --- hooks for the code that does the work ---------------------------------------------

    def openstack_call(self, region: str, result: str, seconds: float) -> None:
        self.openstack_requests.labels(region, result).inc()
        if result != PAUSED:
            self.openstack_seconds.labels(region).observe(seconds)

    def reconciled(self, controller: str, seconds: float, ok: bool) -> None:
        self.reconcile_seconds.labels(controller).observe(seconds)
        if not ok:
            self.reconcile_errors.labels(controller).inc()

    def watch_restarted(self, reason: str) -> None:
        self.watch_restarts.labels(reason).inc()

    def service_watch_restarted(self, reason: str) -> None:
        self.service_watch_restarts.labels(reason).inc()

    def event_written(self, reason: str) -> None:
        self.events.labels(reason).inc()

    def bind(self, queue_depth: Callable[[], int], nodes_cached: Callable[[], int],
             leader: Callable[[], bool], paused: Callable[[], dict[str, bool]]) -> None:
        """Gauges read at scrape time from the live objects."""
        self.queue_depth.set_function(lambda: float(queue_depth()))
        self.nodes_cached.set_function(lambda: float(nodes_cached()))
        self.leader.set_function(lambda: 1.0 if leader() else 0.0)
        self.registry.register(_BreakerCollector(paused))

    def bind_services(self, queue_depth: Callable[[], int], cached: Callable[[], int]) -> None:
        """The service controller's gauges, read at scrape time."""
        self.service_queue_depth.set_function(lambda: float(queue_depth()))
        self.services_cached.set_function(lambda: float(cached()))

    def render(self) -> bytes:
        return generate_latest(self.registry)


@dataclass
class Health:
    """What the probes judge; every field is read live."""

    last_beat: Callable[[], float]  # monotonic time of the main loop's last progress
    synced: Callable[[], bool]  # the Node cache holds a full LIST
    threads_alive: Callable[[], bool]  # informer (and Lease renewer) threads still run
    stall_after: float = 180.0
    clock: Callable[[], float] = time.monotonic

    def live(self) -> tuple[bool, str]:
        idle = self.clock() - self.last_beat()
        if idle > self.stall_after:
            return False, f"main loop made no progress for {idle:.0f}s (limit {self.stall_after:.0f}s)"
        if not self.threads_alive():
            return False, "a helper thread (informer or lease) has died"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        if not self.synced():
            return False, "node cache not synced yet"
        return self.live()


@dataclass
class HealthServer:
    """The HTTP server thread; ``port`` 0 picks a free port (tests)."""

    health: Health
    metrics: Metrics
    address: str = "0.0.0.0"
    port: int = 10258
    _server: ThreadingHTTPServer | None = field(default=None, init=False)

    def start(self) -> int:
        handler = _handler(self.health, self.metrics)
        self._server = ThreadingHTTPServer((self.address, self.port), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="health-http", daemon=True).start()
        return self._server.server_address[1]

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def _handler(health: Health, metrics: Metrics) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._reply(200, metrics.render(), CONTENT_TYPE_LATEST)
            elif path in ("/healthz", "/livez"):
                self._probe(*health.live())
            elif path == "/readyz":
                self._probe(*health.ready())
            else:
                self._reply(404, b"not found\n", "text/plain")

        def _probe(self, ok: bool, why: str) -> None:
            self._reply(200 if ok else 503, f"{why}\n".encode(), "text/plain; charset=utf-8")

        def _reply(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
            pass  # probes every few seconds would drown the log

    return Handler
