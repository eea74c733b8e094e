"""The kmock tier's harness: the real operator (kopf + isthmus.operator.handlers) in-process
against the kmock Kubernetes emulator.

kmock stores objects and serves list/watch/patch, nothing more: no uid, no
generation, no defaulting, no GC, no controllers. So, as openstack-k8s-operators'
envtest suites do, the tests *simulate* the world: :func:`simulate_ready` patches
Deployment and Job statuses; the harness's client fills ``uid`` and
``metadata.generation`` (bumped on spec changes) as an API server would.
"""

from __future__ import annotations

import asyncio
import base64
import configparser
import os
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any

os.environ.setdefault("ISTHMUS_OPERATOR_RESYNC", "30")
os.environ.setdefault("ISTHMUS_OPERATOR_WATCH_TIMEOUT", "30")
# A deletion waits on a chain of cleanups (registration -> Region -> cloud), each looking again
# after this delay when not finished.
os.environ.setdefault("ISTHMUS_OPERATOR_CLEANUP_RETRY", "0.5")
# As the shipped Deployment configures it: the CCM's cloud.conf goes to kube-system.
os.environ.setdefault("ISTHMUS_OPERATOR_TARGET_NAMESPACES", "kube-system")

import kopf  # noqa: E402 - after the environment the operator reads at import
from kopf._cogs.aiokits import aiotasks as kopf_aiotasks  # noqa: E402 - after the environment the operator reads at import

from isthmus.operator import GROUP, VERSION, handlers  # noqa: E402 - after the environment the operator reads at import
from isthmus.operator.crds import KINDS  # noqa: E402 - after the environment the operator reads at import
from isthmus.operator.kube_client import RESOURCES, Kube  # noqa: E402 - after the environment the operator reads at import
from tests.unit.operator.conftest import PASSWORDS, make_cloud  # noqa: E402 - after the environment the operator reads at import

Obj = dict[str, Any]
NS = "ns1"
REQUEST_LOG_KEPT = 20
TRIM_EVERY = 0.05

# When stopping, kopf waits up to 5 s for every task created after it started (it assumes
# they are its handlers) before cancelling them; the test's task that awaits kopf is one of
# them, so every stop took 5 s. Those waiting tasks are left out (kopf's private helper;
# if it moves, stopping is only slower again).
_WAITERS: weakref.WeakSet[asyncio.Task] = weakref.WeakSet()
_kopf_all_tasks = getattr(kopf_aiotasks, "all_tasks", None)


async def _all_tasks_but_waiters(*args: Any, **kwargs: Any) -> set:
    assert _kopf_all_tasks is not None
    return {task for task in await _kopf_all_tasks(*args, **kwargs) if task not in _WAITERS}


if _kopf_all_tasks is not None:
    kopf_aiotasks.all_tasks = _all_tasks_but_waiters


class ServerLikeKube(Kube):
    """Plays the API server's metadata bookkeeping that kmock leaves out."""

    async def create(self, obj: Obj) -> Obj:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("generation", 1)
        # kopf's finalizer patches test resourceVersion; kmock keeps whatever is stored.
        meta.setdefault("resourceVersion", "1")
        return await super().create(obj)

    async def patch(self, kind: str, namespace: str | None, name: str, patch: Obj,
                    subresource: str | None = None) -> Obj | None:
        if subresource is None and "spec" in patch:
            current = await self.get(kind, namespace, name)
            if current is not None:
                generation = (current["metadata"].get("generation") or 1) + 1
                patch = {**patch, "metadata": {**patch.get("metadata", {}), "generation": generation}}
        return await super().patch(kind, namespace, name, patch, subresource)


def register_resources(kmock: Any) -> None:
    verbs = {"get", "list", "watch", "create", "update", "patch", "delete"}
    for kind, (plural, short, _) in KINDS.items():
        kmock.resources[f"{GROUP}/{VERSION}/{plural}"] = {
            "namespaced": True, "kind": kind, "singular": kind.lower(), "verbs": verbs, "shortnames": {short},
            "categories": set(), "subresources": {"status"}}
    # kopf waits for namespaces and CRDs to be discoverable before it watches anything.
    for path, kind in (("v1/namespaces", "Namespace"),
                       ("apiextensions.k8s.io/v1/customresourcedefinitions", "CustomResourceDefinition")):
        kmock.resources[path] = {"namespaced": False, "kind": kind, "singular": kind.lower(), "verbs": verbs,
                                 "shortnames": set(), "categories": set(), "subresources": set()}
    for kind, res in RESOURCES.items():
        if res.group == GROUP:
            continue
        kmock.resources[f"{res.api_version}/{res.plural}"] = {
            "namespaced": res.namespaced, "kind": kind, "singular": kind.lower(), "verbs": verbs, "shortnames": set(),
            "categories": set(), "subresources": {"status"} if kind in ("Deployment", "Job") else set()}


class Operator:
    """A running operator plus a test client for the emulator."""

    def __init__(self, kmock: Any) -> None:
        self.kmock = kmock
        self.client = ServerLikeKube(str(kmock.url))
        self.stop_flag = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.trimmer: asyncio.Task | None = None

    async def _trim_request_log(self) -> None:
        """kmock keeps every request it served and matches each new one by scanning that
        log (per reaction too), so a test's cost grows with the square of its requests:
        a long test slowed from ~60 to ~7 requests/s. These tests never assert on the
        log; keep its tail (a request is matched right after it is appended, and only
        re-matched after an await when a reaction declines it). Even a 50-request tail
        cost most of the CPU (a Region converged in 6-8 s; 2-3 s with 20 trimmed every
        50 ms); 20 stays well above the requests in flight at once (4 workers, kopf's
        watches and patches, the test)."""
        while True:
            await asyncio.sleep(TRIM_EVERY)
            del self.kmock._requests[:-REQUEST_LOG_KEPT]
            for reaction in self.kmock._payloads:
                del reaction._requests[:-REQUEST_LOG_KEPT]

    async def start(self) -> None:
        if self.trimmer is None:
            self.trimmer = asyncio.create_task(self._trim_request_log())
        os.environ["ISTHMUS_OPERATOR_SERVER"] = str(self.kmock.url).rstrip("/")
        # A new operator remembers nothing: its own state, in its memo (an index of
        # resources that outlived the previous test left a resource re-created under a
        # remembered name unreconciled until the timer). The client also plays the API
        # server's uid/generation bookkeeping.
        self.state = handlers.OperatorState(kube_factory=lambda info: ServerLikeKube(info.server))
        settings = kopf.OperatorSettings()
        settings.watching.server_timeout = 30
        settings.networking.error_backoffs = [0.1, 0.2, 0.5]
        self.task = asyncio.create_task(kopf.operator(
            clusterwide=True, standalone=True, stop_flag=self.stop_flag, settings=settings,
            memo=kopf.Memo(state=self.state)))
        await self.until(lambda: self.state.queue is not None, "operator login")

    async def stop(self) -> None:
        # The test client first: the emulator's task serving its keep-alive connection
        # would be one more task for kopf to wait for (see _all_tasks_but_waiters).
        await self.client.close()
        task = asyncio.current_task()
        assert task is not None  # stop() is a coroutine: it runs in a task
        _WAITERS.add(task)
        self.stop_flag.set()
        if self.task is not None:
            try:
                await asyncio.wait_for(self.task, timeout=10)
            except (TimeoutError, asyncio.CancelledError):
                self.task.cancel()
        os.environ.pop("ISTHMUS_OPERATOR_SERVER", None)

    async def close(self) -> None:
        await self.stop()
        if self.trimmer is not None:
            self.trimmer.cancel()
            self.trimmer = None

    async def restart(self) -> None:
        await self.stop()
        self.stop_flag = asyncio.Event()
        self.client = ServerLikeKube(str(self.kmock.url))
        await self.start()

    # --- the world -------------------------------------------------------------------------------

    async def create(self, obj: Obj) -> Obj:
        obj.setdefault("metadata", {}).setdefault("namespace", NS)
        return await self.client.create(obj)

    async def get(self, kind: str, name: str, namespace: str = NS) -> Obj | None:
        return await self.client.get(kind, namespace, name)

    async def must_get(self, kind: str, name: str, namespace: str = NS) -> Obj:
        """``kind name``, which the test expects to exist."""
        found = await self.get(kind, name, namespace)
        assert found is not None, f"{kind} {name} not found"
        return found

    async def list(self, kind: str, namespace: str = NS, **labels: str) -> list[Obj]:
        return await self.client.list(kind, namespace, labels or None)

    async def patch(self, kind: str, name: str, patch: Obj, namespace: str = NS, subresource: str | None = None):
        return await self.client.patch(kind, namespace, name, patch, subresource)

    async def delete(self, kind: str, name: str, namespace: str = NS) -> None:
        await self.client.delete(kind, namespace, name)

    async def until(self, check: Callable[[], Any], what: str, timeout: float = 40.0) -> Any:
        """Poll a sync or async check until it returns something truthy."""
        return await poll(check, f"{what} ({{}}; {len(self.kmock.objects)} objects in the emulator)", timeout)

    async def condition(self, kind: str, name: str, type_: str) -> Obj | None:
        obj = await self.get(kind, name)
        for c in ((obj or {}).get("status") or {}).get("conditions") or []:
            if c["type"] == type_:
                return c
        return None

    async def must_condition(self, kind: str, name: str, type_: str) -> Obj:
        """The condition, which the test expects to be set."""
        found = await self.condition(kind, name, type_)
        assert found is not None, f"{kind} {name} has no {type_} condition"
        return found

    async def wait_condition(self, kind: str, name: str, type_: str, status: str, timeout: float = 40.0) -> Obj:
        async def check():
            c = await self.condition(kind, name, type_)
            return c if c and c["status"] == status else None
        try:
            return await self.until(check, f"{kind} {name} {type_}={status}", timeout)
        except AssertionError as exc:
            obj = await self.get(kind, name)
            from isthmus.operator.kube_client import RESOURCES
            res = RESOURCES[kind]
            versions: list[list[tuple[Any, Any]]] | str
            try:
                versions = [ [(c["type"], c["status"]) for c in ((v or {}).get("status") or {}).get("conditions", [])]
                            for v in self.kmock.objects[f"{res.api_version}/{res.plural}", NS, name].history]
            except Exception as e:  # noqa: BLE001 - only decorates the assertion
                versions = repr(e)
            raise AssertionError(f"{exc}; conditions: {((obj or {}).get('status') or {}).get('conditions')}; "
                                 f"history {versions}") from exc

    async def simulate_ready(self, namespace: str = NS) -> int:
        """Mark every managed Deployment ready and every Job complete (as lib-common's
        SimulateDeploymentReplicaReady / SimulateJobSuccess do); the number changed."""
        changed = 0
        for dep in await self.list("Deployment", namespace):
            replicas = dep["spec"].get("replicas", 1)
            generation = dep["metadata"].get("generation", 1)
            want = {"replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
                    "updatedReplicas": replicas, "observedGeneration": generation}
            if any((dep.get("status") or {}).get(k) != v for k, v in want.items()):
                await self.patch("Deployment", dep["metadata"]["name"], {"status": want}, namespace, "status")
                changed += 1
        for job in await self.list("Job", namespace):
            if not (job.get("status") or {}).get("succeeded"):
                await self.patch("Job", job["metadata"]["name"], {"status": {"succeeded": 1, "conditions": [
                    {"type": "Complete", "status": "True"}]}}, namespace, "status")
                changed += 1
        return changed

    async def converge(self, kind: str, name: str, timeout: float = 60.0) -> Obj:
        """Simulate readiness until ``kind name`` is Ready=True."""
        async def check():
            await self.simulate_ready()
            c = await self.condition(kind, name, "Ready")
            return c if c and c["status"] == "True" else None
        try:
            return await self.until(check, f"{kind} {name} Ready", timeout)
        except AssertionError as exc:
            obj = await self.get(kind, name)
            raise AssertionError(f"{exc}; conditions: {((obj or {}).get('status') or {}).get('conditions')}") from exc

    async def settle(self) -> None:
        """Until the operator's queue is empty twice in a row (no reconcile in flight)."""
        for _ in range(2):
            await self.state.work().idle()
            await asyncio.sleep(0.2)

    def versions(self, kinds: tuple[str, ...] = ("Secret", "ConfigMap", "Service", "Deployment", "Job")) -> dict:
        """How many versions kmock holds of each object of ``kinds`` (a write adds one)."""
        plurals = {f"{RESOURCES[k].api_version}/{RESOURCES[k].plural}" for k in kinds}
        out = {}
        for (resource, namespace, name), obj in list(self.kmock.objects.items()):
            if f"{resource.group + '/' if resource.group else ''}{resource.version}/{resource.plural}" in plurals:
                out[(resource.plural, namespace, name)] = len(obj.history)
        return out


# --- helpers of the tests ---------------------------------------------------------------------------------------------

async def poll(check: Callable[[], Any], what: str, timeout: float = 40.0, every: float = 0.05) -> Any:
    """Call a sync or async ``check`` until it returns something truthy (its value), or fail
    naming ``what`` (``{}`` in it: the last value)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if asyncio.iscoroutine(last):
            last = await last
        if last:
            return last
        await asyncio.sleep(every)
    raise AssertionError(f"timed out waiting for {what.replace('{}', f'last: {last!r}')}")


def secret(name: str, data: dict[str, str]) -> Obj:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS}, "stringData": data}


async def make(op: Operator, with_secret: bool = True, **overrides: Any) -> Obj:
    """The input Secrets (unless ``with_secret`` is false) and a MultiRegionCloud ``cloud``."""
    if with_secret:
        await op.create(secret("passwords", dict(PASSWORDS)))
        await op.create(secret("appcred", {"application-credential-id": "id1",
                                           "application-credential-secret": "sec1"}))
    cloud = make_cloud(namespace=NS, **overrides)
    cloud["metadata"]["generation"] = 1
    cloud["metadata"].pop("uid")
    return await op.create(cloud)


def ini(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    return parser


def secret_file(obj: Obj, key: str) -> str:
    return base64.b64decode(obj["data"][key]).decode()


async def registrations(op: Operator, owner: str) -> dict[str, Obj]:
    """The EndpointRegistrations of resource ``owner``, by service type."""
    return {r["spec"]["serviceType"]: r for r in
            await op.list("EndpointRegistration", **{"app.kubernetes.io/instance": owner})}
