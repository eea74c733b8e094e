"""kopf wiring: every event becomes a request to reconcile some resources.

The handlers are plain kopf-decorated functions, one block per kind (an event
handler, a resync timer, a cleanup handler for the kinds with a finalizer), each
a one-line call of the shared functions above them (:func:`on_event`,
:func:`resync`, :func:`clean_up`). They never reconcile themselves: they put
keys (kind, namespace, name) on a :class:`WorkQueue`, and the queue's workers
call :mod:`isthmus.operator.controllers`.

Why a work queue rather than reconciling in kopf's handlers: the reconcile is
level-based, it reads the whole state of its resource and of what it depends on
in the same cloud, so what woke it does not matter, only which key; a resource is
woken by events of *other* objects too (a child's conditions, a Deployment's
rollout, a Secret it reads). The queue runs at most one reconcile per key at a
time whatever woke it (kopf's handlers of different objects would run side by
side), coalesces a burst (a rollout's dozen Pod events) into one run, and bounds
the reconciles running at once to its few workers. What an event enqueues: its
owner and the resources of the same cloud that read it, from an in-memory index
the watch events feed (no API call); the timer per resource re-enqueues it
(drift repair).

State: what the handlers share (the queue, the leadership, the index) lives in
kopf's memo (:class:`OperatorState`, :func:`state_of`), not in module globals.

Settings: ``ISTHMUS_OPERATOR_RESYNC`` (seconds between timer ticks, default 60),
``ISTHMUS_OPERATOR_CLEANUP_RETRY`` (seconds before an unfinished deletion cleanup looks
again, default 2), ``ISTHMUS_OPERATOR_LEASE`` (leader election, :mod:`isthmus.operator.leader`),
``ISTHMUS_OPERATOR_TARGET_NAMESPACES`` (:func:`isthmus.operator.controllers.target_namespaces`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import kopf

from isthmus.operator import GROUP, MANAGED_BY, VERSION, controllers
from isthmus.operator.crds import KINDS
from isthmus.operator.kube_client import Kube
from isthmus.operator.leader import Leadership

LOG = logging.getLogger(__name__)
Key = tuple[str, str, str]  # kind, namespace, name

RESYNC_SECONDS = float(os.environ.get("ISTHMUS_OPERATOR_RESYNC", "60"))
CLEANUP_RETRY_SECONDS = float(os.environ.get("ISTHMUS_OPERATOR_CLEANUP_RETRY", "2"))
MANAGED = {"app.kubernetes.io/managed-by": MANAGED_BY}
# A timer waits this long after the resource last changed: events already woke it then.
RESYNC_IDLE = min(10.0, RESYNC_SECONDS)


class WorkQueue:
    """At most one reconcile per key at a time; a key queued twice while waiting runs once;
    at most ``workers`` reconciles at once. Why the operator has one: the module's docstring."""

    def __init__(self, kube: Kube, workers: int = 4) -> None:
        self.kube = kube
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._running: set[Key] = set()
        self._again: set[Key] = set()
        self._later: dict[Key, asyncio.TimerHandle] = {}
        self._tasks = [asyncio.create_task(self._work(), name=f"isthmus-reconcile-{i}") for i in range(workers)]

    def add(self, key: Key) -> None:
        if key in self._running:
            self._again.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            if key in self._running:  # picked by another worker meanwhile: run it after that one
                self._again.add(key)
                self._queued.discard(key)
                continue
            self._queued.discard(key)
            self._running.add(key)
            try:
                await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - one resource's failure must not stop the others
                LOG.exception("reconciling %s %s/%s failed; the timer retries", *key)
            finally:
                self._running.discard(key)
                if key in self._again:
                    self._again.discard(key)
                    self.add(key)

    def add_after(self, key: Key, seconds: float) -> None:
        """Queue ``key`` again in ``seconds`` (one pending timer per key: the latest wins)."""
        if (handle := self._later.pop(key, None)) is not None:
            handle.cancel()
        def fire() -> None:
            self._later.pop(key, None)
            self.add(key)
        self._later[key] = asyncio.get_running_loop().call_later(seconds, fire)

    async def reconcile(self, key: Key) -> None:
        kind, namespace, name = key
        obj = await self.kube.get(kind, namespace, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        obj.setdefault("kind", kind)
        # A reconciler may return when it must run again (a time-based action such as
        # key rotation), as controller-runtime's RequeueAfter; the resync timer is the backstop.
        after = await controllers.RECONCILERS[kind](self.kube, obj)
        if after is not None:
            self.add_after(key, after)

    async def idle(self) -> None:
        """Until nothing is queued or running (tests)."""
        while self._queued or self._running or self._again:
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        for handle in self._later.values():
            handle.cancel()
        self._later.clear()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.kube.close()


@dataclass
class OperatorState:
    """What the handlers of one operator share: the work queue (on login), the
    leadership, and the index of Isthmus resources the watch events feed. It lives
    in kopf's operator memo (``memo.state``); every resource's memo is a shallow
    copy of that memo, so every handler sees this one object. Tests embedding the
    operator pass their own (``kopf.operator(memo=kopf.Memo(state=...))``)."""

    kube_factory: Callable[[kopf.ConnectionInfo], Kube] = Kube.from_connection_info
    queue: WorkQueue | None = None
    leadership: Leadership | None = None
    known: dict[Key, tuple[str | None, Any, str]] = field(default_factory=dict)

    def work(self) -> WorkQueue:
        if self.queue is None:
            raise kopf.TemporaryError("the operator has not logged in yet", delay=1)
        return self.queue


def state_of(memo: Any) -> OperatorState:
    """The operator's state in ``memo`` (made on first use: the startup handler)."""
    if "state" not in memo:
        memo["state"] = OperatorState()
    state: OperatorState = memo["state"]
    return state


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Keep kopf's bookkeeping in annotations: statuses hold only our schema's fields
    # (a structural schema would prune kopf's status.kopf anyway).
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    settings.persistence.finalizer = f"{GROUP}/cleanup"
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = int(os.environ.get("ISTHMUS_OPERATOR_WATCH_TIMEOUT", "300"))
    # Several replicas: only the Lease holder goes past this point (kopf starts no watch
    # before its startup handlers are done); see isthmus.operator.leader.
    state = state_of(memo)
    leadership = Leadership.from_env()
    if leadership is not None:
        state.leadership = leadership
        await leadership.acquire()


@kopf.on.login()
async def login(memo: kopf.Memo, **kwargs: Any) -> kopf.ConnectionInfo | None:
    """kopf's own login (in-cluster service account or kubeconfig), or ISTHMUS_OPERATOR_SERVER
    (the kmock emulator in tests); the reconcilers' client uses the same credentials."""
    server = os.environ.get("ISTHMUS_OPERATOR_SERVER")
    info: kopf.ConnectionInfo | None
    if server:
        info = kopf.ConnectionInfo(server=server)
    else:
        info = kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)
    state = state_of(memo)
    if info is not None and state.queue is None:
        state.queue = WorkQueue(state.kube_factory(info))
    return info


@kopf.on.cleanup()
async def shutdown(memo: kopf.Memo, **_: Any) -> None:
    state = state_of(memo)
    work, state.queue = state.queue, None
    if work is not None:
        await work.stop()
    leadership, state.leadership = state.leadership, None
    if leadership is not None:
        await leadership.release()  # the standby takes over now, not after the lease runs out


# --- what an event enqueues ------------------------------------------------------------------------------------------

def cloud_of(body: Any) -> str | None:
    return (body.get("metadata", {}).get("labels") or {}).get("app.kubernetes.io/part-of")


def signature(body: Any) -> str:
    """What others react to: condition states and central's registrations (not messages or times)."""
    status = body.get("status") or {}
    states = [(c.get("type"), c.get("status"), c.get("reason")) for c in status.get("conditions") or []]
    return json.dumps([states, status.get("registeredRegions"), status.get("observedGeneration")], sort_keys=True)


def remember(known: dict[Key, tuple[str | None, Any, str]], kind: str, namespace: str, name: str, body: Any,
             gone: bool = False) -> tuple[Any, Any] | None:
    """The in-memory index of Isthmus resources (kind, namespace, name) -> (cloud, generation,
    signature), fed by the watch events themselves, so fanning out costs no API call.
    Returns the previous (generation, signature), None for a new resource."""
    previous = known.pop((kind, namespace, name), None)
    if not gone:
        cloud = cloud_of(body) or (name if kind == "MultiRegionCloud" else None)
        known[(kind, namespace, name)] = (cloud, body.get("metadata", {}).get("generation"), signature(body))
    return None if previous is None else previous[1:]


def same_cloud(known: dict[Key, tuple[str | None, Any, str]], namespace: str, cloud: str | None,
               kinds: tuple[str, ...] | None = None) -> list[Key]:
    if not cloud:
        return []
    return [key for key, (owner, _, _) in known.items()
            if owner == cloud and key[1] == namespace and (kinds is None or key[0] in kinds)]


async def enqueue_related(state: OperatorState, kind: str, namespace: str, name: str, body: Any) -> None:
    """Level-triggered but frugal: a new resource or a new generation is reconciled; a change
    of its conditions' states wakes its owner (mirroring) and the resources of the same cloud
    that read it (Keystone ready, regions registered); other events (our own status writes,
    kopf's annotations) wake nobody. The timer catches anything missed."""
    work = state.work()
    previous = remember(state.known, kind, namespace, name, body)
    generation, sig = body.get("metadata", {}).get("generation"), signature(body)
    if previous is None or previous[0] != generation:
        work.add((kind, namespace, name))
    if previous is None or previous[1] != sig:
        for ref in body.get("metadata", {}).get("ownerReferences") or []:
            if ref.get("kind") in KINDS:
                work.add((ref["kind"], namespace, ref["name"]))
        if kind != "MultiRegionCloud":
            for key in same_cloud(state.known, namespace, cloud_of(body)):
                readers = key[0] not in ("MultiRegionCloud", "EndpointRegistration")
                if readers or (key[0] == "EndpointRegistration" and kind == "IdentityService"):
                    work.add(key)


async def enqueue_referrers(state: OperatorState, namespace: str, name: str, fields: tuple[str, ...]) -> None:
    """Isthmus resources whose spec names ``name`` in one of ``fields`` (a Secret, a NAD)."""
    work = state.work()
    for kind in KINDS:
        if not any(key[0] == kind and key[1] == namespace for key in state.known):
            continue
        for item in await work.kube.list(kind, namespace):
            spec = item.get("spec") or {}
            refs = {spec.get(f) for f in fields if isinstance(spec.get(f), str)}
            refs |= {(spec.get("tls") or {}).get("publicCertSecret"),
                     (spec.get("credentialsSecretRef") or {}).get("name")}
            refs |= set((spec.get("neutron") or {}).get("networkAttachments") or [])
            refs |= {(spec.get("existingControlPlane") or {}).get("name")}
            if name in refs:
                work.add((kind, namespace, item["metadata"]["name"]))


async def enqueue_owner_and_cloud(state: OperatorState, kind: str, namespace: str, name: str, body: Any) -> None:
    work = state.work()
    owners = [ref for ref in body.get("metadata", {}).get("ownerReferences") or [] if ref.get("kind") in KINDS]
    for ref in owners:
        work.add((ref["kind"], namespace, ref["name"]))
    instance = (body.get("metadata", {}).get("labels") or {}).get("app.kubernetes.io/instance")
    if not owners and instance:
        # Pods belong to a ReplicaSet, not to us; their instance label names our resource.
        for other in KINDS:
            work.add((other, namespace, instance))
    for key in same_cloud(state.known, namespace, cloud_of(body), ("CentralNetwork", "APIGateway",
                                                                  "CloudControllerConfig")):
        work.add(key)



# --- what every handler does, whatever its kind ---------------------------------------------------------------------

async def on_event(kind: str, event: kopf.RawEvent, body: kopf.Body, namespace: str | None, name: str,
                   memo: kopf.Memo) -> None:
    """An Isthmus resource changed or went away: wake what depends on it."""
    assert namespace is not None  # kopf passes None for cluster-scoped kinds only
    state = state_of(memo)
    if event.get("type") == "DELETED":
        # A removed child: its parent recreates it or drops it from the status.
        remember(state.known, kind, namespace, name, body, gone=True)
        await enqueue_owner_and_cloud(state, kind, namespace, name, body)
    else:
        await enqueue_related(state, kind, namespace, name, body)


async def resync(kind: str, namespace: str | None, name: str, memo: kopf.Memo) -> None:
    """The timer's tick: reconcile the resource whatever happened (drift repair)."""
    assert namespace is not None  # kopf passes None for cluster-scoped kinds only
    work = state_of(memo).queue
    if work is not None:  # not while shutting down
        work.add((kind, namespace, name))


async def clean_up(kind: str, body: kopf.Body, memo: kopf.Memo) -> None:
    """The finalizer's work (kinds in ``controllers.DELETERS``): kopf calls again until it is done."""
    state = state_of(memo)
    obj = {**dict(body), "kind": kind}
    if not await controllers.DELETERS[kind](state.work().kube, obj):
        raise kopf.TemporaryError("waiting for cleanup to finish", delay=CLEANUP_RETRY_SECONDS)
    await enqueue_owner_and_cloud(state, kind, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], obj)


# --- the handlers of the Isthmus kinds -------------------------------------------------------------------------------
# One block per kind in crds.KINDS: an event handler, a resync timer and, for the kinds in
# controllers.DELETERS, a cleanup handler. The ids name kopf's progress annotations on the
# resources, so they stay as they are. tests/unit/operator/test_handlers.py checks these
# declarations against KINDS and DELETERS.

@kopf.on.event(GROUP, VERSION, "multiregionclouds", id="event-multiregionclouds")
async def multi_region_cloud_changed(event: kopf.RawEvent, body: kopf.Body, namespace: str | None, name: str,
                                     memo: kopf.Memo, **_: Any) -> None:
    await on_event("MultiRegionCloud", event, body, namespace, name, memo)


@kopf.timer(GROUP, VERSION, "multiregionclouds", interval=RESYNC_SECONDS, idle=RESYNC_IDLE,
            id="resync-multiregionclouds")
async def multi_region_cloud_resync(namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    await resync("MultiRegionCloud", namespace, name, memo)


@kopf.on.delete(GROUP, VERSION, "multiregionclouds", id="cleanup-multiregionclouds")
async def multi_region_cloud_deleted(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await clean_up("MultiRegionCloud", body, memo)


@kopf.on.event(GROUP, VERSION, "identityservices", id="event-identityservices")
async def identity_service_changed(event: kopf.RawEvent, body: kopf.Body, namespace: str | None, name: str,
                                   memo: kopf.Memo, **_: Any) -> None:
    await on_event("IdentityService", event, body, namespace, name, memo)


@kopf.timer(GROUP, VERSION, "identityservices", interval=RESYNC_SECONDS, idle=RESYNC_IDLE,
            id="resync-identityservices")
async def identity_service_resync(namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    await resync("IdentityService", namespace, name, memo)


@kopf.on.event(GROUP, VERSION, "regions", id="event-regions")
async def region_changed(event: kopf.RawEvent, body: kopf.Body, namespace: str | None, name: str,
                         memo: kopf.Memo, **_: Any) -> None:
    await on_event("Region", event, body, namespace, name, memo)


@kopf.timer(GROUP, VERSION, "regions", interval=RESYNC_SECONDS, idle=RESYNC_IDLE, id="resync-regions")
async def region_resync(namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    await resync("Region", namespace, name, memo)


@kopf.on.delete(GROUP, VERSION, "regions", id="cleanup-regions")
async def region_deleted(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await clean_up("Region", body, memo)


@kopf.on.event(GROUP, VERSION, "centralnetworks", id="event-centralnetworks")
async def central_network_changed(event: kopf.RawEvent, body: kopf.Body, namespace: str | None, name: str,
                                  memo: kopf.Memo, **_: Any) -> None:
    await on_event("CentralNetwork", event, body, namespace, name, memo)


@kopf.timer(GROUP, VERSION, "centralnetworks", interval=RESYNC_SECONDS, idle=RESYNC_IDLE,
            id="resync-centralnetworks")
async def central_network_resync(namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    await resync("CentralNetwork", namespace, name, memo)


@kopf.on.event(GROUP, VERSION, "apigateways", id="event-apigateways")
async def api_gateway_changed(event: kopf.RawEvent, body: kopf.Body, namespace: str | None, name: str,
                              memo: kopf.Memo, **_: Any) -> None:
    await on_event("APIGateway", event, body, namespace, name, memo)


@kopf.timer(GROUP, VERSION, "apigateways", interval=RESYNC_SECONDS, idle=RESYNC_IDLE, id="resync-apigateways")
async def api_gateway_resync(namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    await resync("APIGateway", namespace, name, memo)


@kopf.on.event(GROUP, VERSION, "cloudcontrollerconfigs", id="event-cloudcontrollerconfigs")
async def cloud_controller_config_changed(event: kopf.RawEvent, body: kopf.Body, namespace: str | None, name: str,
                                          memo: kopf.Memo, **_: Any) -> None:
    await on_event("CloudControllerConfig", event, body, namespace, name, memo)


@kopf.timer(GROUP, VERSION, "cloudcontrollerconfigs", interval=RESYNC_SECONDS, idle=RESYNC_IDLE,
            id="resync-cloudcontrollerconfigs")
async def cloud_controller_config_resync(namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    await resync("CloudControllerConfig", namespace, name, memo)


@kopf.on.delete(GROUP, VERSION, "cloudcontrollerconfigs", id="cleanup-cloudcontrollerconfigs")
async def cloud_controller_config_deleted(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await clean_up("CloudControllerConfig", body, memo)


@kopf.on.event(GROUP, VERSION, "endpointregistrations", id="event-endpointregistrations")
async def endpoint_registration_changed(event: kopf.RawEvent, body: kopf.Body, namespace: str | None, name: str,
                                        memo: kopf.Memo, **_: Any) -> None:
    await on_event("EndpointRegistration", event, body, namespace, name, memo)


@kopf.timer(GROUP, VERSION, "endpointregistrations", interval=RESYNC_SECONDS, idle=RESYNC_IDLE,
            id="resync-endpointregistrations")
async def endpoint_registration_resync(namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    await resync("EndpointRegistration", namespace, name, memo)


@kopf.on.delete(GROUP, VERSION, "endpointregistrations", id="cleanup-endpointregistrations")
async def endpoint_registration_deleted(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await clean_up("EndpointRegistration", body, memo)


# --- the handlers of the objects the operator owns or reads ----------------------------------------------------------
# The same function for every kind (kopf's stacked decorators): what it does does not depend on the kind.

@kopf.on.event("", "v1", "secrets", labels=MANAGED, id="managed-secrets")
@kopf.on.event("", "v1", "configmaps", labels=MANAGED, id="managed-configmaps")
@kopf.on.event("", "v1", "services", labels=MANAGED, id="managed-services")
@kopf.on.event("apps", "v1", "deployments", labels=MANAGED, id="managed-deployments")
@kopf.on.event("batch", "v1", "jobs", labels=MANAGED, id="managed-jobs")
@kopf.on.event("", "v1", "pods", labels=MANAGED, id="managed-pods")
async def managed_object_changed(body: kopf.Body, namespace: str | None, name: str, memo: kopf.Memo,
                                 **_: Any) -> None:
    """A child changed or went away (a hand-deleted Service, a rollout): its owner repairs or reports it."""
    assert namespace is not None  # kopf passes None for cluster-scoped kinds only
    await enqueue_owner_and_cloud(state_of(memo), "", namespace, name, body)


@kopf.on.event("", "v1", "secrets", id="input-secrets")
async def input_secret_changed(body: kopf.Body, namespace: str | None, name: str, memo: kopf.Memo,
                               **_: Any) -> None:
    """A Secret the user gives (passwords, TLS, credentials) appeared or changed: its readers run."""
    assert namespace is not None  # kopf passes None for cluster-scoped kinds only
    if (body.get("metadata", {}).get("labels") or {}).get("app.kubernetes.io/managed-by") != MANAGED_BY:
        await enqueue_referrers(state_of(memo), namespace, name, ("secret",))


@kopf.on.event("k8s.cni.cncf.io", "v1", "network-attachment-definitions", id="input-nads")
@kopf.on.event("core.openstack.org", "v1beta1", "openstackcontrolplanes", id="input-controlplanes")
async def input_named_in_spec_changed(namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    """A NAD or an OpenStackControlPlane a spec names appeared or changed: the resources naming it run."""
    assert namespace is not None  # kopf passes None for cluster-scoped kinds only
    await enqueue_referrers(state_of(memo), namespace, name, ())
