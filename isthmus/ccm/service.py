"""``isthmus-ccm``: the multi-region cloud controller manager process.

An informer thread keeps a cache of Nodes (one LIST, then a WATCH) and
queues each Node whose content changed; the main loop, only on the Lease
holder, works through that queue (initialisation, with per-node backoff),
and runs the periodic passes over the *cache*: NotReady checks every
``--node-monitor-period``, address re-sync every
``--node-status-update-frequency``, and a re-queue of every Node every
``--node-resync-period``. No pass lists Nodes from the API server. The Lease
is renewed on its own thread so a slow cloud call does not cost the
leadership; a replica that loses it stops at the next Node. The service
controller (``loadbalancer/controller.py``) runs on threads of its own: it
reads the same Node cache and watches Services the same way.

Startup is strict where OCCM is (bad config, Keystone authentication, a
configured region Keystone does not know) and lenient per region: a region
that is down or lacks a service in the catalog is reported and only its nodes
are affected.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from isthmus.ccm.controllers.lifecycle import LifecycleController
from isthmus.ccm.controllers.node import NodeController
from isthmus.ccm.kube.informer import Informer, NodeCache, WatchSettings, WorkQueue
from isthmus.ccm.kube.nodes import NodeAPI, NodeView
from isthmus.ccm.leading import work_while_leading
from isthmus.kube.leader import LeaseElector

LOG = logging.getLogger("isthmus.ccm")


@dataclass
class Periods:
    node_monitor: float = 5.0  # upstream --node-monitor-period
    node_status_update: float = 300.0  # upstream --node-status-update-frequency
    # Re-queue every cached Node: a safety net for work our own code dropped.
    # It reads the cache only; a Node that needs nothing costs no call.
    node_resync: float = 300.0
    lease_retry: float = 2.0


class ReconcileObserver(Protocol):
    """Where the loop reports its work (the Prometheus metrics, or nothing)."""

    def reconciled(self, controller: str, seconds: float, ok: bool) -> None: ...


class _NoObserver:
    def reconciled(self, controller: str, seconds: float, ok: bool) -> None:
        pass


@dataclass
class Manager:
    """The controllers, the cache and queue they read; ``step`` is one turn of the loop."""

    cache: NodeCache
    queue: WorkQueue
    node_controller: NodeController
    lifecycle: LifecycleController
    periods: Periods
    clock: Callable[[], float] = time.monotonic
    # Checked before every node: a replica that lost the Lease mid-pass stops at once
    # instead of finishing a long pass next to the new leader.
    active: Callable[[], bool] = field(default=lambda: True)
    observer: ReconcileObserver = field(default_factory=_NoObserver)
    last_beat: float = field(default_factory=time.monotonic)  # progress, for /healthz
    _last: dict[str, float] = field(default_factory=dict)

    def beat(self) -> None:
        self.last_beat = self.clock()

    def _due(self, what: str, period: float) -> bool:
        last = self._last.get(what)
        if last is not None and self.clock() - last < period:
            return False
        self._last[what] = self.clock()
        return True

    def started_leading(self) -> None:
        """A new leader trusts nothing the old one did: every pass now, every Node queued."""
        self._last.clear()

    def step(self, wait: float = 0.0, budget: float = 1.0) -> None:
        """The periodic passes that are due, then queued Nodes for up to ``budget`` seconds.

        Waits up to ``wait`` seconds for the first queued Node, so an event
        is handled at once rather than at the next tick.
        """
        self.beat()
        if not self.cache.synced.is_set():
            self.cache.synced.wait(wait)  # acting on a partial cache could miss or misjudge Nodes
            return
        if self._due("resync", self.periods.node_resync):
            self.queue.add_all(v.name for v in self.cache.list())
        if self._due("monitor", self.periods.node_monitor):
            self._timed("lifecycle", self.lifecycle.check, self._while_active(self.cache.list(), "monitor"))
        if self._due("addresses", self.periods.node_status_update):
            self._timed("addresses", lambda v: self.node_controller.update_addresses([v]),
                        self._while_active(self.cache.list(), "addresses"))
        self.drain(wait, budget)

    def drain(self, wait: float = 0.0, budget: float = 1.0) -> int:
        """Reconcile queued Nodes until the queue is empty or ``budget`` is spent."""
        done = 0
        until = self.clock() + budget
        name = self.queue.get(wait)
        while name is not None:
            if not self.active():
                self.queue.add(name)  # not ours to do now; the next leader re-queues everything anyway
                LOG.warning("no longer the leader: queue work stopped")
                return done
            self.process(name)
            done += 1
            self.beat()
            if self.clock() >= until:
                break
            name = self.queue.get(0.0)
        return done

    def process(self, name: str) -> None:
        view = self.cache.get(name)
        if view is None:  # deleted meanwhile
            self.queue.forget(name)
            return
        started = self.clock()
        try:
            self.node_controller.reconcile(view)
        except Exception as exc:  # noqa: BLE001 - any failure keeps the taint; retry with backoff
            delay = self.queue.retry(name)
            LOG.warning("node %s: initialisation failed (retry in %.1fs): %s", name, delay, exc)
            self.observer.reconciled("node", self.clock() - started, False)
        else:
            self.queue.forget(name)
            self.observer.reconciled("node", self.clock() - started, True)

    def _timed(self, controller: str, work: Callable[[NodeView], Any], views: Iterable[NodeView]) -> None:
        for view in views:
            started = self.clock()
            ok = True
            try:
                work(view)
            except Exception as exc:  # noqa: BLE001 - one Node's failure must not stop the pass
                ok = False
                LOG.warning("node %s: %s check failed: %s", view.name, controller, exc)
            self.observer.reconciled(controller, self.clock() - started, ok)
            self.beat()

    def _while_active(self, views: Iterable[NodeView], what: str) -> Iterator[NodeView]:
        for view in views:
            if not self.active():
                LOG.warning("no longer the leader: %s pass stopped", what)
                return
            yield view


def renew_forever(elector: LeaseElector, stop: threading.Event, period: float) -> None:
    while not stop.is_set():
        elector.try_acquire_or_renew()
        stop.wait(period)


@dataclass
class Threads:
    """The helper threads of a running service, for health checks."""

    renewer: threading.Thread
    informer: threading.Thread


def start_threads(manager: Manager, elector: LeaseElector, informer: Informer, stop: threading.Event) -> Threads:
    renewer = threading.Thread(target=renew_forever, args=(elector, stop, manager.periods.lease_retry),
                               name="lease", daemon=True)
    # Standbys watch too: their cache is warm when they take over.
    watcher = threading.Thread(target=informer.run, args=(stop,), name="node-informer", daemon=True)
    renewer.start()
    watcher.start()
    return Threads(renewer, watcher)


def run(manager: Manager, elector: LeaseElector, informer: Informer, stop: threading.Event,
        tick: float = 1.0, on_threads: Callable[[Threads], None] | None = None) -> None:
    """Run until ``stop`` is set; act only while holding the Lease."""
    manager.active = elector.is_leader
    threads = start_threads(manager, elector, informer, stop)
    if on_threads is not None:
        on_threads(threads)
    try:
        # A step fails e.g. while the API server is briefly away.
        work_while_leading(stop, elector.is_leader, manager.started_leading, lambda: manager.step(wait=tick),
                           tick=tick, log=LOG, what="controller pass", beat=manager.beat)
    finally:
        stop.set()
        informer.stop()
        manager.queue.wake()
        threads.renewer.join(timeout=manager.periods.lease_retry + 5)
        threads.informer.join(timeout=5)
        elector.release()


def kube_api_client(kubeconfig: str | None) -> Any:
    from kubernetes import client, config

    if kubeconfig:
        return config.new_client_from_config(config_file=kubeconfig)
    configuration = client.Configuration()
    config.load_incluster_config(client_configuration=configuration)
    return client.ApiClient(configuration)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="isthmus-ccm", description=__doc__.splitlines()[0])
    p.add_argument("--cloud-config", required=True, metavar="FILE", help="OCCM cloud.conf")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster service account)")
    p.add_argument("--leader-elect-resource-name", default="isthmus-cloud-controller-manager")
    p.add_argument("--leader-elect-resource-namespace", default="kube-system")
    p.add_argument("--identity", default=f"{socket.gethostname()}_{uuid.uuid4()}")
    p.add_argument("--node-monitor-period", type=float, default=5.0)
    p.add_argument("--node-status-update-frequency", type=float, default=300.0)
    p.add_argument("--node-resync-period", type=float, default=300.0,
                   help="re-queue every cached Node this often (no API call unless one needs work)")
    p.add_argument("--kube-api-timeout", type=float, default=30.0,
                   help="timeout of every Kubernetes API request (watches: of each read)")
    p.add_argument("--bind-address", default="0.0.0.0", help="address of the /healthz, /readyz, /metrics server")
    p.add_argument("--http-port", type=int, default=10258,
                   help="port of the plain-HTTP /healthz, /readyz, /metrics server (0: none)")
    p.add_argument("--liveness-stall-seconds", type=float, default=0.0,
                   help="/healthz fails after the main loop made no progress this long "
                        "(default: 3 x [Metadata] request-timeout, at least 60)")
    p.add_argument("--delete-nodes-without-provider-id", action="store_true",
                   help="let the lifecycle controller delete NotReady nodes found by no name (upstream behaviour)")
    p.add_argument("-v", "--verbose", action="store_true")
    from isthmus.ccm.controllers.service import add_arguments  # LoadBalancer Services

    add_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from kubernetes import client

    from isthmus.ccm.config import load_config
    from isthmus.ccm.errors import CCMError
    from isthmus.ccm.health import Health, HealthServer, Metrics
    from isthmus.ccm.kube.events import NodeEvents
    from isthmus.ccm.openstack.clients import OpenStackClients
    from isthmus.ccm.openstack.instances import Instances

    metrics = Metrics()
    try:
        config = load_config(args.cloud_config)
        clients = OpenStackClients.from_config(config)
        clients.observe = metrics.openstack_call
        clients.session.get_token()  # authentication failure is fatal, as in OCCM
        unknown = clients.unknown_regions()
        if unknown:  # a typo is fatal (as OCCM's multi-region support has it); an outage is not
            raise CCMError(f"regions {', '.join(unknown)}: not known to Keystone (misspelt in regions=?)")
    except Exception as exc:  # noqa: BLE001 - report one line and exit
        print(f"isthmus-ccm: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    for region, problem in clients.check().items():
        if problem:
            LOG.warning("region %s unusable for now (only its nodes are affected): %s", region, problem)
    instances = Instances(clients, config.regions, config.networking)
    api = kube_api_client(args.kubeconfig)
    core = client.CoreV1Api(api)
    nodes = NodeAPI(core, timeout=args.kube_api_timeout)
    events = NodeEvents(core, instance=args.identity, timeout=args.kube_api_timeout, on_written=metrics.event_written)
    cache, queue = NodeCache(), WorkQueue()
    manager = Manager(
        cache, queue,
        NodeController(nodes, instances, events=events),
        LifecycleController(nodes, instances, args.delete_nodes_without_provider_id, events=events),
        Periods(node_monitor=args.node_monitor_period, node_status_update=args.node_status_update_frequency,
                node_resync=args.node_resync_period),
        observer=metrics,
    )
    informer = Informer(nodes, cache, queue.add, WatchSettings(), on_restart=metrics.watch_restarted)
    elector = LeaseElector(client.CoordinationV1Api(api), args.leader_elect_resource_name,
                           args.leader_elect_resource_namespace, args.identity)
    metrics.bind(lambda: len(queue), lambda: len(cache), elector.is_leader,
                 lambda: {r: clients.breaker.is_open(r) for r in config.regions})
    threads: list[Threads] = []
    service_threads: list[Any] = []  # the service controller's (none when it is disabled)
    stall = args.liveness_stall_seconds or max(60.0, 3 * config.metadata.request_timeout)
    health = Health(lambda: manager.last_beat, cache.synced.is_set,
                    lambda: bool(threads) and all(t.is_alive() for t in (threads[0].renewer, threads[0].informer))
                    and all(t.alive() for t in service_threads),
                    stall_after=stall)
    server = HealthServer(health, metrics, args.bind_address, args.http_port)
    if args.http_port:
        try:
            server.start()
        except OSError as exc:
            print(f"isthmus-ccm: cannot serve {args.bind_address}:{args.http_port}: {exc}", file=sys.stderr)
            return 1
    stop = threading.Event()
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    LOG.info("serving regions %s (default %s) as %s", ",".join(config.regions), config.default_region, args.identity)
    from isthmus.ccm.controllers.service import start_service_controller  # LoadBalancer Services

    # Before the Node informer runs: the service controller subscribes to its changes and reads its cache.
    started = start_service_controller(args, config, clients.session, core, elector.is_leader, stop,
                                       node_cache=cache, node_informer=informer, metrics=metrics)
    if started is not None:
        service_threads.append(started)
    try:
        run(manager, elector, informer, stop, on_threads=threads.append)
    except CCMError as exc:
        LOG.error("%s", exc)
        return 1
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
