"""The few Node operations the controllers need, over the official client.

Writes are JSON merge patches: they carry only what changes, and a
``metadata.resourceVersion`` in a patch makes the API server refuse it (409)
if the Node changed since it was read, which is how list-valued fields such
as taints are replaced without losing a concurrent change.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from isthmus.ccm.instances import InstanceMetadata, NodeRef
from isthmus.ccm.model import NodeAddress

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
    )


class NodeAPI:
    """Nodes through ``kubernetes.client.CoreV1Api``."""

    def __init__(self, core: Any) -> None:
        self.core = core

    def list(self) -> list[NodeView]:
        return [node_view(n) for n in self.core.list_node().items]

    def get(self, name: str) -> NodeView:
        return node_view(self.core.read_node(name))

    def patch(self, name: str, patch: dict[str, Any]) -> None:
        self.core.patch_node(name, patch, _content_type=MERGE_PATCH)

    def patch_addresses(self, name: str, addresses: Iterable[NodeAddress]) -> None:
        body = {"status": {"addresses": [a.to_dict() for a in addresses]}}
        self.core.patch_node_status(name, body, _content_type=MERGE_PATCH)

    def delete(self, name: str) -> None:
        self.core.delete_node(name)


def with_precondition(node: NodeView, patch: dict[str, Any]) -> dict[str, Any]:
    """Add the Node's resourceVersion so a stale patch fails with 409."""
    if node.resource_version:
        patch.setdefault("metadata", {})["resourceVersion"] = node.resource_version
    return patch


def is_conflict(exc: BaseException) -> bool:
    return getattr(exc, "status", None) == 409
