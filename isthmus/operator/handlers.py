"""kopf wiring: every event becomes a request to reconcile some resources.

Level-based, as the reference design recommends for a control-plane operator:
an event on an Isthmus resource or on a managed object (Deployment, Job,
Service, ...) enqueues its owner and the resources of the same cloud that
depend on it; a timer per resource re-enqueues it (drift repair); a coalescing
queue runs at most one reconcile per resource at a time and collapses bursts.
What each reconcile does lives in :mod:`isthmus.operator.controllers`.

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
KIND_BY_PLURAL = {plural: kind for kind, (plural, _, _) in KINDS.items()}


class WorkQueue:
    """At most one reconcile per key at a time; a key queued twice runs once.

    Why a queue of our own and not kopf's per-resource handlers: a reconcile is
    woken by events of *other* objects (a child's conditions, a Deployment's
    rollout, a Secret it reads), which kopf would deliver to handlers of those
    objects, each free to run beside the parent's own handler. Funnelling every
    wake-up into one key per resource gives one reconcile at a time per resource
    whatever woke it, collapses a burst (a rollout's dozen Pod events) into one
    run, and lets the fan-out to related resources cost no API call."""

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


def _register_isthmus_kinds() -> None:
    for kind, (plural, _, _) in KINDS.items():
        async def on_event(event: Any, body: Any, namespace: str | None, name: str, memo: kopf.Memo,
                           _kind: str = kind, **_: Any) -> None:
            assert namespace is not None  # kopf passes None for cluster-scoped kinds only
            state = state_of(memo)
            if event.get("type") == "DELETED":
                # A removed child: its parent recreates it or drops it from the status.
                remember(state.known, _kind, namespace, name, body, gone=True)
                await enqueue_owner_and_cloud(state, _kind, namespace, name, body)
            else:
                await enqueue_related(state, _kind, namespace, name, body)

        kopf.on.event(GROUP, VERSION, plural, id=f"event-{plural}")(on_event)

        async def tick(namespace: str | None, name: str, memo: kopf.Memo, _kind: str = kind, **_: Any) -> None:
            assert namespace is not None  # kopf passes None for cluster-scoped kinds only
            work = state_of(memo).queue
            if work is not None:  # not while shutting down
                work.add((_kind, namespace, name))

        kopf.timer(GROUP, VERSION, plural, interval=RESYNC_SECONDS, idle=min(10.0, RESYNC_SECONDS),
                   id=f"resync-{plural}")(tick)

        if kind in controllers.DELETERS:
            async def on_delete(body: Any, memo: kopf.Memo, _kind: str = kind, **_: Any) -> None:
                state = state_of(memo)
                obj = {**dict(body), "kind": _kind}
                if not await controllers.DELETERS[_kind](state.work().kube, obj):
                    raise kopf.TemporaryError("waiting for cleanup to finish", delay=CLEANUP_RETRY_SECONDS)
                await enqueue_owner_and_cloud(state, _kind, obj["metadata"].get("namespace", ""),
                                              obj["metadata"]["name"], obj)

            kopf.on.delete(GROUP, VERSION, plural, id=f"cleanup-{plural}")(on_delete)


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


def _register_managed_kinds() -> None:
    for group, version, plural in (("", "v1", "secrets"), ("", "v1", "configmaps"), ("", "v1", "services"),
                                   ("apps", "v1", "deployments"), ("batch", "v1", "jobs"), ("", "v1", "pods")):
        async def on_managed(body: Any, namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
            assert namespace is not None  # kopf passes None for cluster-scoped kinds only
            await enqueue_owner_and_cloud(state_of(memo), "", namespace, name, body)

        kopf.on.event(group, version, plural, labels=MANAGED, id=f"managed-{plural}")(on_managed)

    async def on_secret(body: Any, namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
        assert namespace is not None  # kopf passes None for cluster-scoped kinds only
        if (body.get("metadata", {}).get("labels") or {}).get("app.kubernetes.io/managed-by") != MANAGED_BY:
            await enqueue_referrers(state_of(memo), namespace, name, ("secret",))

    kopf.on.event("", "v1", "secrets", id="input-secrets")(on_secret)

    async def on_nad(namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
        assert namespace is not None  # kopf passes None for cluster-scoped kinds only
        await enqueue_referrers(state_of(memo), namespace, name, ())

    kopf.on.event("k8s.cni.cncf.io", "v1", "network-attachment-definitions", id="input-nads")(on_nad)

    async def on_control_plane(namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
        assert namespace is not None  # kopf passes None for cluster-scoped kinds only
        await enqueue_referrers(state_of(memo), namespace, name, ())

    kopf.on.event("core.openstack.org", "v1beta1", "openstackcontrolplanes", id="input-controlplanes")(
        on_control_plane)


_register_isthmus_kinds()
_register_managed_kinds()
