"""The service controller: LoadBalancer Services -> Octavia load balancers in their nodes' regions.

Per Service, in one pass:

* wanted (type LoadBalancer, no ``spec.loadBalancerClass``, not deleting):
  add the finalizer ``service.kubernetes.io/load-balancer-cleanup`` **before**
  creating anything (so a CCM restart can always clean up), converge every
  planned region, delete our load balancers in configured regions that no
  longer have member nodes, then patch ``status.loadBalancer.ingress``;
* not wanted but carrying our finalizer (deleted, or its type changed): delete
  our load balancers and floating IPs in every configured region, and remove
  the finalizer only once every region answered and is clean.

A region that fails (down, 5xx, timeout, ERROR, still PENDING) is reported by
a Warning event naming it and the Service is retried after its backoff (or
at the next pass, for ``sync()``); nothing is deleted on
its account and, while it fails, its old ingress entries stay in the status.

Services are watched, not listed per pass: a Service informer (the same
LIST-then-WATCH loop as the Nodes', ``kube/informer.py``) keeps a
cache of Services, and Nodes are read from the cache the node controllers'
informer already keeps. A Service is put in a work queue when it changes
(that Service only), every LoadBalancer Service when the load-balancer view
of the Nodes (region, InternalIP, readiness, cordon, exclusion label)
changes, at most once per ``--service-sync-period``, and every
``--service-resync-period`` as a backstop. A Service is converged only when
its spec, annotations or member nodes changed, after a failure (retried with
a per-Service backoff, 5 s doubling to 5 min, as k8s' service controller),
or at the resync: a quiet cluster costs no Kubernetes request beyond the
two watches, and no OpenStack call.

``ServiceController.sync()`` without caches is a standalone pass: one LIST
of Services and one of Nodes (tests and tools use it; isthmus-ccm does not).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from isthmus.ccm.errors import RegionError
from isthmus.ccm.gcfg import parse_bool
from isthmus.ccm.kube.informer import Backoff, Cache, Informer, NodeCache, WatchSettings, WorkQueue
from isthmus.ccm.kube.services import ServiceAPI
from isthmus.ccm.leading import work_while_leading
from isthmus.ccm.openstack.loadbalancer import model as m
from isthmus.ccm.openstack.loadbalancer.octavia import LBError, NoOctavia, OctaviaAPI, RegionReconciler
from isthmus.ccm.openstack.loadbalancer.options import LoadBalancerConfig
from isthmus.ccm.openstack.loadbalancer.plan import Plan, lb_name, plan_service

LOG = logging.getLogger(__name__)

class ServiceCache(Cache[m.ServiceView]):
    """``namespace/name`` -> latest ServiceView (a Service being deleted stays until its finalizers go)."""

    def __init__(self) -> None:
        super().__init__(lambda v: v.key)


def service_queue(clock: Callable[[], float] = time.monotonic) -> WorkQueue:
    """Service keys, with k8s' service controller's retry backoff: 5 s doubling to 5 min."""
    return WorkQueue(Backoff(base=5.0, cap=300.0, clock=clock), clock=clock)


class ReconcileObserver(Protocol):
    def reconciled(self, controller: str, seconds: float, ok: bool) -> None: ...


class OctaviaRegions(Protocol):
    def client(self, region: str) -> OctaviaAPI: ...


@dataclass
class Outcome:
    """What one Service's pass did; for tests and logs."""

    ingress: list[dict[str, str]] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # region -> error
    changes: list[str] = field(default_factory=list)
    finalizer_removed: bool = False


def _fingerprint(service: m.ServiceView, nodes: Sequence[m.LBNode]) -> str:
    data = [service.uid, service.type, service.load_balancer_class, service.load_balancer_ip,
            sorted(service.annotations.items()), [p.__dict__ for p in service.ports], service.deleting,
            [n.__dict__ for n in nodes]]  # not the finalizers: adding ours is no reason to converge again
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class ServiceController:
    api: ServiceAPI
    octavia: OctaviaRegions
    config: LoadBalancerConfig
    regions: tuple[str, ...]
    cluster_name: str = "kubernetes"
    wait_timeout: float = 60.0
    resync: float = 600.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    # Checked before every Service: a replica that lost the Lease mid-pass stops at once.
    active: Callable[[], bool] = field(default=lambda: True)
    # The watched caches (``start_service_controller``); without them ``sync()`` LISTs.
    services: Cache[m.ServiceView] | None = None
    nodes: Cache[Any] | None = None  # the node controllers' NodeCache
    queue: WorkQueue = field(default_factory=service_queue)
    # Node changes re-queue every LoadBalancer Service at most this often (--service-sync-period).
    node_pass_spacing: float = 10.0
    observer: ReconcileObserver | None = None
    _done: dict[str, tuple[str, float]] = field(default_factory=dict)  # uid -> (fingerprint, when)
    _warned: dict[str, set[str]] = field(default_factory=dict)  # uid -> unknown annotations reported
    _events: set[tuple[str, str, str]] = field(default_factory=set)  # (uid, reason, message) already emitted
    _node_lock: threading.Lock = field(default_factory=threading.Lock)
    _node_generation: int = 0  # bumped by every Node change the informer reports
    _lb_nodes: tuple[int, list[m.LBNode]] = (-1, [])  # (generation, LB view of the Node cache)
    _nodes_passed: tuple[int, list[m.LBNode] | None] = (-1, None)  # the same, when every Service was last queued
    _last_node_pass: float | None = None
    _last_resync: float | None = None

    # --- one pass (standalone, or over the caches) ---

    def sync(self, services: Iterable[m.ServiceView] | None = None,
             nodes: Sequence[m.LBNode] | None = None) -> dict[str, Outcome]:
        """One pass over every Service; returns the outcome of those acted on.

        From the caches when the controller has them, else one LIST of
        Services and one of Nodes (a standalone pass)."""
        if services is None:
            services = self.services.list() if self.services is not None else self.api.list_services()
        if nodes is None:
            nodes = self.current_nodes() if self.nodes is not None else self.api.list_nodes()
        outcomes = {}
        for service in services:
            if not self.active():
                LOG.warning("no longer the leader: service pass stopped")
                break
            try:
                outcome = self.sync_service(service, nodes)
            except Exception as exc:  # noqa: BLE001 - e.g. the API server; the next pass retries
                LOG.warning("service %s: %s", service.key, exc)
                continue
            if outcome is not None:
                outcomes[service.key] = outcome
        return outcomes

    @staticmethod
    def relevant(service: m.ServiceView) -> bool:
        """Ours to act on: wants a load balancer, or carries our finalizer, and names no other class."""
        if service.load_balancer_class:
            # Another controller's Service, even if it carries the same (standard) finalizer.
            return False
        return service.wants_load_balancer or service.has_finalizer

    def sync_service(self, service: m.ServiceView, nodes: Sequence[m.LBNode]) -> Outcome | None:
        """Converge one Service, unless it is not ours or nothing changed since its last success.

        None when skipped; raises what the Kubernetes API raised."""
        if not self.relevant(service):
            return None
        fingerprint = _fingerprint(service, nodes)
        done = self._done.get(service.uid)
        if done and done[0] == fingerprint and self.clock() - done[1] < self.resync:
            return None
        outcome = self.reconcile(service, nodes)
        if outcome.failed:
            self._done.pop(service.uid, None)
        else:
            self._done[service.uid] = (fingerprint, self.clock())
        return outcome

    # --- the watched loop ---

    def service_changed(self, key: str) -> None:
        """The Service informer's ``on_change``: queue that Service (if it can be ours)."""
        view = self.services.get(key) if self.services is not None else None
        if view is None or self.relevant(view):  # gone: queued so that its backoff is forgotten
            self.queue.add(key)

    def node_changed(self, name: str) -> None:
        """Subscribed to the Node informer: the LB view of the Nodes may have changed."""
        with self._node_lock:
            self._node_generation += 1

    def current_nodes(self) -> list[m.LBNode]:
        """The Node cache as load-balancer member candidates; recomputed only after a Node change."""
        assert self.nodes is not None
        with self._node_lock:
            generation = self._node_generation
        if self._lb_nodes[0] != generation:
            self._lb_nodes = (generation, [m.lb_node_from_view(v) for v in self.nodes.list()])
        return self._lb_nodes[1]

    def _node_pass(self, now: float) -> float | None:
        """Queue every Service if the LB view of the Nodes changed since the last time and the
        spacing allows it; else the seconds until it does (None: nothing to do)."""
        nodes = self.current_nodes()
        generation = self._lb_nodes[0]
        if generation == self._nodes_passed[0]:
            return None
        if nodes == self._nodes_passed[1]:  # a Node change the load balancers do not see (a taint...)
            self._nodes_passed = (generation, nodes)
            return None
        if self._last_node_pass is not None and now - self._last_node_pass < self.node_pass_spacing:
            return self.node_pass_spacing - (now - self._last_node_pass)
        self._nodes_passed, self._last_node_pass = (generation, nodes), now
        count = self.queue_all()
        LOG.debug("nodes changed: %d LoadBalancer Service(s) queued", count)
        return None

    def queue_all(self) -> int:
        """Queue every Service that is ours; returns how many."""
        assert self.services is not None
        keys = [s.key for s in self.services.list() if self.relevant(s)]
        self.queue.add_all(keys)
        return len(keys)

    def started_leading(self) -> None:
        """A new leader trusts nothing the old one did: every LoadBalancer Service is converged again."""
        self._done.clear()
        self._last_resync = None

    def synced(self) -> bool:
        return (self.services is not None and self.services.synced.is_set()
                and self.nodes is not None and self.nodes.synced.is_set())

    def step(self, wait: float = 0.0, stop: threading.Event | None = None) -> int:
        """The re-queues that are due, then queued Services; returns how many were processed.

        Waits up to ``wait`` seconds for a queued Service."""
        assert self.services is not None and self.nodes is not None
        if not self.synced():
            # A partial cache could report "no Ready node" or miss a Service being deleted.
            (self.nodes if self.services.synced.is_set() else self.services).synced.wait(wait)
            return 0
        now = self.clock()
        if self._last_resync is None or (self.resync > 0 and now - self._last_resync >= self.resync):
            self._last_resync = now
            self._done.clear()  # converge even what looks unchanged
            self.queue_all()
        left = self._node_pass(now)
        if left is not None:
            wait = min(wait, left)  # come back when the spacing allows the pass
        return self.drain(wait, stop)

    def drain(self, wait: float = 0.0, stop: threading.Event | None = None) -> int:
        """Process queued Services until the queue is empty; the Lease is checked before each."""
        done = 0
        key = self.queue.get(wait)
        while key is not None:
            if not self.active():
                self.queue.add(key)  # the next leader converges everything anyway
                LOG.warning("no longer the leader: service work stopped")
                return done
            self.process(key)
            done += 1
            if stop is not None and stop.is_set():
                break
            key = self.queue.get(0.0)
        return done

    def process(self, key: str) -> None:
        """One queued Service, read from the cache; a failure retries it after its backoff."""
        assert self.services is not None
        service = self.services.get(key)
        if service is None:  # gone: a Service with our finalizer stays cached until we remove it
            self.queue.forget(key)
            return
        started = self.clock()
        try:
            outcome = self.sync_service(service, self.current_nodes())
        except Exception as exc:  # noqa: BLE001 - e.g. the API server, a 409 on a stale read
            delay = self.queue.retry(key)
            LOG.warning("service %s: %s (retry in %.0fs)", key, exc, delay)
            ok = False
        else:
            ok = outcome is None or not outcome.failed
            if ok:
                self.queue.forget(key)
            else:
                assert outcome is not None  # not ok: an outcome with failures
                delay = self.queue.retry(key)
                LOG.info("service %s: region(s) %s failed, retry in %.0fs", key,
                         ", ".join(sorted(outcome.failed)), delay)
            if outcome is None:
                return  # nothing done: not worth a reconcile sample
        if self.observer is not None:
            self.observer.reconciled("service", self.clock() - started, ok)

    def run(self, stop: threading.Event, tick: float = 1.0) -> None:
        """Work from the caches until ``stop``, only while ``active()``."""
        # self.active is read each round (a caller may swap it); a step fails e.g. on a
        # cache read racing a bug.
        work_while_leading(stop, lambda: self.active(), self.started_leading, lambda: self.step(wait=tick, stop=stop),
                           tick=tick, log=LOG, what="service controller step")

    def reconcile(self, service: m.ServiceView, nodes: Sequence[m.LBNode]) -> Outcome:
        if service.wants_load_balancer:
            return self.ensure(service, nodes)
        return self.cleanup(service)

    # --- ensure ---

    def ensure(self, service: m.ServiceView, nodes: Sequence[m.LBNode]) -> Outcome:
        plan = plan_service(service, nodes, self.config, self.regions, self.cluster_name)
        self._report_plan(service, plan)
        outcome = Outcome()
        if plan.no_nodes:
            return outcome
        if not service.has_finalizer:
            # Before any cloud object exists: a crash from here on can still clean up.
            self.api.patch(service, _with_version(service, {"finalizers": [*service.finalizers, m.FINALIZER]}))
        self._event(service, "Normal", "EnsuringLoadBalancer",
                    f"Ensuring load balancer in {', '.join(sorted(plan.load_balancers)) or 'no region'}")
        by_region: dict[str, list[dict[str, str]]] = {}
        for region, desired in sorted(plan.load_balancers.items()):
            try:
                result = self._reconciler(region).ensure(desired, service.uid, service.key)
            except (RegionError, LBError) as exc:
                outcome.failed[region] = str(exc)
                continue
            outcome.changes += [f"{region}: {c}" for c in result.changes]
            for problem in result.problems:
                self._event(service, "Warning", "LoadBalancerProblem", problem)
            if result.address:
                by_region[region] = [{"hostname": plan.hostname} if plan.hostname else {"ip": result.address}]
        # Regions without member nodes any more: our load balancers there go. A region
        # in the plan that failed above is not touched here.
        for region in self.regions:
            if region in plan.load_balancers or region in plan.skipped:
                continue
            try:
                done = self._reconciler(region).delete(lb_name(self.cluster_name, service.namespace, service.name),
                                                       service.uid, self._keep_fip(service))
            except NoOctavia:
                continue  # a region without Octavia holds no load balancer to sweep
            except (RegionError, LBError) as exc:
                outcome.failed[region] = str(exc)
                continue
            outcome.changes += [f"{region}: {c}" for c in done]
        outcome.ingress = self._ingress(service, plan, by_region, outcome)
        if [dict(i) for i in service.ingress] != outcome.ingress:
            self.api.patch_status(service, outcome.ingress)
        for region, error in sorted(outcome.failed.items()):
            self._event(service, "Warning", "SyncLoadBalancerFailed",
                        f"Error syncing load balancer in region {region}: {error}")
        if not outcome.failed:
            self._forget_events(service, "SyncLoadBalancerFailed")  # a later failure is news again
            for change in outcome.changes:
                LOG.info("service %s: %s", service.key, change)
            self._event(service, "Normal", "EnsuredLoadBalancer",
                        f"Ensured load balancer in {', '.join(sorted(by_region)) or 'no region'}: "
                        f"{', '.join(i.get('ip') or i.get('hostname', '') for i in outcome.ingress)}")
        return outcome

    def _ingress(self, service: m.ServiceView, plan: Plan, by_region: dict[str, list[dict[str, str]]],
                 outcome: Outcome) -> list[dict[str, str]]:
        ingress: list[dict[str, str]] = []
        for region in sorted(by_region):
            for entry in by_region[region]:
                if entry not in ingress:
                    ingress.append(entry)
        if outcome.failed:
            # We cannot tell which old entry was the failed region's: keep them all until it answers.
            for old in service.ingress:
                if dict(old) not in ingress:
                    ingress.append(dict(old))
        return ingress

    # --- cleanup ---

    def cleanup(self, service: m.ServiceView) -> Outcome:
        outcome = Outcome()
        name = lb_name(self.cluster_name, service.namespace, service.name)
        for region in self.regions:
            try:
                outcome.changes += [f"{region}: {c}" for c in
                                    self._reconciler(region).delete(name, service.uid, self._keep_fip(service),
                                                                    service_key=service.key)]
            except NoOctavia as exc:
                # Nothing can be there; a region whose Octavia endpoint was removed after we
                # made a load balancer would leak it (logged), never block deletion forever.
                LOG.info("service %s: %s: nothing to delete there", service.key, exc)
            except (RegionError, LBError) as exc:
                outcome.failed[region] = str(exc)
        if outcome.failed:
            for region, error in sorted(outcome.failed.items()):
                self._event(service, "Warning", "SyncLoadBalancerFailed",
                            f"Error deleting load balancer in region {region} (finalizer kept, retrying): {error}")
            return outcome
        if outcome.changes:
            self._event(service, "Normal", "DeletedLoadBalancer",
                        f"Deleted load balancer: {'; '.join(outcome.changes)}")
        if not service.deleting and service.ingress:
            self.api.patch_status(service, [])
        finalizers = [f for f in service.finalizers if f != m.FINALIZER]
        self.api.patch(service, _with_version(service, {"finalizers": finalizers or None}))
        outcome.finalizer_removed = True
        self._done.pop(service.uid, None)
        self._warned.pop(service.uid, None)
        self._forget_events(service)
        return outcome

    # --- helpers ---

    def _keep_fip(self, service: m.ServiceView) -> bool:
        raw = m.annotation(service.annotations, m.ANN_KEEP_FLOATINGIP)
        try:
            return parse_bool(raw) if raw else False
        except ValueError:
            return True  # unreadable: the safe side is to keep the address

    def _reconciler(self, region: str) -> RegionReconciler:
        return RegionReconciler(self.octavia.client(region), timeout=self.wait_timeout, sleep=self.sleep,
                                clock=self.clock)

    def _report_plan(self, service: m.ServiceView, plan: Plan) -> None:
        new = set(plan.unknown_annotations) - self._warned.get(service.uid, set())
        if new:
            self._warned.setdefault(service.uid, set()).update(new)
            message = f"annotations not supported by isthmus-ccm, ignored: {', '.join(sorted(new))}"
            self._event(service, "Warning", "UnsupportedAnnotation", message)  # logs it too
        for problem in plan.problems:
            self._event(service, "Warning", "LoadBalancerProblem", problem)

    def _forget_events(self, service: m.ServiceView, reason: str = "") -> None:
        self._events = {e for e in self._events if not (e[0] == service.uid and (not reason or e[1] == reason))}

    def _event(self, service: m.ServiceView, kind: str, reason: str, message: str) -> None:
        """One event per new (reason, message): a resync does not repeat what users already saw."""
        if (service.uid, reason, message) in self._events:
            return
        self._events.add((service.uid, reason, message))
        log = LOG.warning if kind == "Warning" else LOG.info
        log("service %s: %s: %s", service.key, reason, message)
        try:
            self.api.event(service, kind, reason, message)
        except Exception as exc:  # noqa: BLE001 - an event is best effort
            LOG.warning("service %s: event %s not recorded: %s", service.key, reason, exc)


def _with_version(service: m.ServiceView, metadata: dict[str, Any]) -> dict[str, Any]:
    """A merge patch of metadata that fails (409) if the Service changed since read:
    finalizers is a list, replaced whole, so a concurrent change must not be lost."""
    if service.resource_version:
        metadata = {**metadata, "resourceVersion": service.resource_version}
    return {"metadata": metadata}


# --- wiring into isthmus-ccm (kept here so service.py changes by a few lines only) ---------

def add_arguments(parser: Any) -> None:
    parser.add_argument("--cluster-name", default="kubernetes",
                        help="names load balancers kube_service_<cluster-name>_<namespace>_<name>, as OCCM")
    parser.add_argument("--service-sync-period", type=float, default=10.0,
                        help="minimum seconds between two re-queues of every LoadBalancer Service on Node "
                             "changes (Node churn is coalesced); a Service change is handled at once. Services "
                             "are watched: no pass lists Services or Nodes")
    parser.add_argument("--service-resync-period", type=float, default=600.0,
                        help="seconds after which every LoadBalancer Service is converged again anyway "
                             "(from the caches; 0: never)")


@dataclass
class ServiceThreads:
    """The service controller's threads, for the health checks."""

    worker: threading.Thread
    informers: tuple[threading.Thread, ...]
    controller: ServiceController

    def alive(self) -> bool:
        return self.worker.is_alive() and all(t.is_alive() for t in self.informers)


def start_service_controller(args: Any, config: Any, session: Any, core: Any, active: Callable[[], bool],
                             stop: threading.Event, node_cache: Cache[Any] | None = None,
                             node_informer: Informer | None = None, metrics: Any = None,
                             watch_settings: WatchSettings | None = None) -> ServiceThreads | None:
    """Start the service controller (its Service informer and its worker), unless
    ``[LoadBalancer] enabled = false``.

    ``node_cache`` and ``node_informer`` are the node controllers' (call this
    before the informer runs): the service controller reads that cache and
    subscribes to its changes. Without them it starts a Node informer of its own.
    """
    from isthmus.ccm.kube.nodes import NodeAPI
    from isthmus.ccm.openstack.loadbalancer.octavia import OctaviaClients

    lb_config: LoadBalancerConfig = config.load_balancer
    if not lb_config.default.get("enabled", True):  # a [LoadBalancer] key: on or off for the whole CCM
        LOG.info("service controller disabled ([LoadBalancer] enabled = false)")
        return None
    timeout = args.kube_api_timeout
    api = ServiceAPI(core, timeout=timeout)
    informers: list[Informer] = []
    if node_cache is None or node_informer is None:
        node_cache = NodeCache()
        node_informer = Informer(NodeAPI(core, timeout=timeout), node_cache, lambda name: None,
                                 watch_settings or WatchSettings())
        informers.append(node_informer)
    controller = ServiceController(
        api, OctaviaClients(session, config.regions, config.global_.interface), lb_config,
        config.regions, cluster_name=args.cluster_name, resync=args.service_resync_period, active=active,
        services=ServiceCache(), nodes=node_cache, node_pass_spacing=args.service_sync_period,
        observer=metrics)
    node_informer.subscribe(controller.node_changed)
    services = controller.services
    assert services is not None
    informers.insert(0, Informer(api, services, controller.service_changed, watch_settings or WatchSettings(),
                                 on_restart=metrics.service_watch_restarted if metrics is not None else
                                 (lambda reason: None), kind="service"))
    if metrics is not None:
        metrics.bind_services(lambda: len(controller.queue), lambda: len(services))

    def work() -> None:
        try:
            controller.run(stop)
        finally:
            for informer in informers:
                informer.stop()

    threads = [threading.Thread(target=i.run, args=(stop,), name=f"service-controller-{i.kind}-informer",
                                daemon=True) for i in informers]
    worker = threading.Thread(target=work, name="service-controller", daemon=True)
    for thread in (*threads, worker):
        thread.start()
    return ServiceThreads(worker, tuple(threads), controller)
