"""The few Node operations the controllers need, over the official client.

:class:`NodeAPI` is also the Node "resource API" of the informer
(``list_with_version``, ``watch``, ``stop_watch``); :func:`watch_events`
turns any watch stream of the official client into :class:`WatchEvent`s, so
the Service informer (``isthmus.ccm.controllers.service.ServiceAPI``)
shares it.

Writes are JSON merge patches: they carry only what changes, and a
``metadata.resourceVersion`` in a patch makes the API server refuse it (409)
if the Node changed since it was read, which is how list-valued fields such
as taints are replaced without losing a concurrent change.
"""

from __future__ import annotations

import builtins
import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from isthmus.ccm.openstack.instances import InstanceMetadata, NodeRef
from isthmus.ccm.openstack.model import NodeAddress

LOG = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"

TAINT_UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
TAINT_SHUTDOWN = "node.cloudprovider.kubernetes.io/shutdown"
ANNOTATION_PROVIDED_NODE_IP = "alpha.kubernetes.io/provided-node-ip"

# GA label -> its deprecated beta twin; both are written at initialisation.
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
BETA_LABELS = {
    LABEL_REGION: "failure-domain.beta.kubernetes.io/region",
    LABEL_ZONE: "failure-domain.beta.kubernetes.io/zone",
    LABEL_INSTANCE_TYPE: "beta.kubernetes.io/instance-type",
}


class CloudInstances(Protocol):
    """What the controllers need from the cloud (``instances.Instances``)."""

    def instance_exists(self, node: NodeRef) -> bool: ...

    def instance_shutdown(self, node: NodeRef) -> bool: ...

    def instance_shutdown_if_exists(self, node: NodeRef) -> bool | None:
        """None on a clean not-found, else whether the server is shut off."""
        ...

    def instance_metadata(self, node: NodeRef) -> InstanceMetadata: ...


@dataclass(frozen=True)
class NodeView:
    """The parts of a ``V1Node`` the controllers read, as plain data."""

    name: str
    provider_id: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    taints: tuple[dict[str, Any], ...]
    addresses: tuple[NodeAddress, ...]
    ready: bool
    resource_version: str
    uid: str = ""
    unschedulable: bool = False  # spec.unschedulable (cordoned): the load balancers read it

    def same_content(self, other: NodeView | None) -> bool:
        """Equal but for the resourceVersion: a kubelet heartbeat changes nothing we read."""
        return other is not None and self == dataclasses.replace(other, resource_version=self.resource_version)

    @property
    def ref(self) -> NodeRef:
        return NodeRef.from_labels(self.name, self.provider_id, self.labels)

    def has_taint(self, key: str) -> bool:
        return any(t.get("key") == key for t in self.taints)


def _taint_dict(taint: Any) -> dict[str, Any]:
    out = {"key": taint.key, "effect": taint.effect}
    if taint.value is not None:
        out["value"] = taint.value
    if taint.time_added is not None:
        out["timeAdded"] = taint.time_added.isoformat().replace("+00:00", "Z")
    return out


def _is_ready(conditions: Iterable[Any] | None) -> bool:
    """Ready iff a Ready condition says True; Unknown or absent is not ready."""
    return any(c.type == "Ready" and c.status == "True" for c in conditions or ())


def node_view(node: Any) -> NodeView:
    meta, spec, status = node.metadata, node.spec, node.status
    return NodeView(
        name=meta.name,
        provider_id=(spec.provider_id if spec else None) or "",
        labels=dict(meta.labels or {}),
        annotations=dict(meta.annotations or {}),
        taints=tuple(_taint_dict(t) for t in (spec.taints if spec else None) or ()),
        addresses=tuple(NodeAddress(a.type, a.address) for a in (status.addresses if status else None) or ()),
        ready=_is_ready(status.conditions if status else None),
        resource_version=meta.resource_version or "",
        uid=meta.uid or "",
        unschedulable=bool(spec.unschedulable) if spec else False,
    )


@dataclass(frozen=True)
class WatchEvent:
    """One event of a watch: ADDED, MODIFIED, DELETED or BOOKMARK (``obj`` None).

    ``obj`` is the view of the watched resource (a :class:`NodeView`, a
    Service's view, ...)."""

    type: str
    obj: Any
    resource_version: str

    @property
    def node(self) -> Any:
        """The Node watch's name for ``obj``."""
        return self.obj


def watch_events(stream: Iterable[dict[str, Any]], view: Callable[[Any], Any]) -> Iterator[WatchEvent]:
    """A ``kubernetes.watch.Watch().stream(...)`` as :class:`WatchEvent`s of ``view(object)``.

    ``view(obj)`` must have a ``resource_version`` attribute. A BOOKMARK
    carries only the resourceVersion (its object is not a full resource)."""
    for event in stream:
        kind = event["type"]
        if kind == "BOOKMARK":
            meta = (event.get("raw_object") or {}).get("metadata") or {}
            yield WatchEvent(kind, None, str(meta.get("resourceVersion") or ""))
            continue
        obj = view(event["object"])
        yield WatchEvent(kind, obj, obj.resource_version)


class WatchHandle:
    """One resource API's running ``kubernetes.watch.Watch``, which another thread may
    stop (shutdown). Nodes and Services stream through it."""

    def __init__(self) -> None:
        self._watch: Any = None

    def stream(self, list_call: Callable[..., Any], view: Callable[[Any], Any], resource_version: str,
               timeout_seconds: int, request_timeout: tuple[float, float]) -> Iterator[WatchEvent]:
        from kubernetes import watch

        w = watch.Watch()
        self._watch = w
        try:
            yield from watch_events(w.stream(list_call, resource_version=resource_version,
                                             timeout_seconds=timeout_seconds, allow_watch_bookmarks=True,
                                             _request_timeout=request_timeout), view)
        finally:
            self._watch = None

    def stop(self) -> None:
        w = self._watch
        if w is not None:
            w.stop()


class NodeAPI:
    """Nodes through ``kubernetes.client.CoreV1Api``; every call has a timeout.

    ``timeout`` bounds each request (connect + read), so a hung API server
    costs the loop one timeout, never a stuck thread. A watch is bounded
    twice: ``timeout_seconds`` asks the server to end it (client-go picks
    5-10 min), and ``read_timeout`` ends it on our side when nothing arrived
    for that long (a half-open connection would otherwise block forever).
    """

    def __init__(self, core: Any, timeout: float = 30.0) -> None:
        self.core = core
        self.timeout = timeout
        self._watching = WatchHandle()

    def list(self) -> list[NodeView]:
        return self.list_with_version()[0]

    def list_with_version(self) -> tuple[builtins.list[NodeView], str]:
        """All Nodes and the list's resourceVersion, from which a watch continues."""
        found = self.core.list_node(_request_timeout=self.timeout)
        return [node_view(n) for n in found.items], (found.metadata.resource_version or "")

    def watch(self, resource_version: str, timeout_seconds: int, read_timeout: float) -> Iterator[WatchEvent]:
        """Events after ``resource_version`` until the server or ``read_timeout`` ends the stream.

        Raises ``ApiException`` (410 when the version is too old: re-list)
        and urllib3's errors (a read timeout is an idle stream, not a loss).
        """
        return self._watching.stream(self.core.list_node, node_view, resource_version, timeout_seconds,
                                     (min(self.timeout, read_timeout), read_timeout))

    def stop_watch(self) -> None:
        """Unblock a running watch at once (shutdown); safe from another thread."""
        self._watching.stop()

    def get(self, name: str) -> NodeView:
        return node_view(self.core.read_node(name, _request_timeout=self.timeout))

    def patch(self, name: str, patch: dict[str, Any]) -> None:
        self.core.patch_node(name, patch, _content_type=MERGE_PATCH, _request_timeout=self.timeout)

    def patch_addresses(self, name: str, addresses: Iterable[NodeAddress]) -> None:
        body = {"status": {"addresses": [a.to_dict() for a in addresses]}}
        self.core.patch_node_status(name, body, _content_type=MERGE_PATCH, _request_timeout=self.timeout)

    def delete(self, name: str) -> None:
        self.core.delete_node(name, _request_timeout=self.timeout)


def with_precondition(node: NodeView, patch: dict[str, Any]) -> dict[str, Any]:
    """Add the Node's resourceVersion so a stale patch fails with 409."""
    if node.resource_version:
        patch.setdefault("metadata", {})["resourceVersion"] = node.resource_version
    return patch


def is_conflict(exc: BaseException) -> bool:
    return getattr(exc, "status", None) == 409
