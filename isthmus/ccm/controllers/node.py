"""Cloud node controller: initialise new Nodes, keep their addresses current.

A Node carrying the ``uninitialized`` taint (kubelet ``--cloud-provider=external``)
is looked up in the cloud; then, in one patch: ``spec.providerID`` if empty,
the region/zone/instance-type labels (GA and beta) for non-empty values, and
the taint removed. Its addresses are patched right after. A failed lookup
leaves the taint, and the Node is retried with a per-node backoff. Labels
and providerID are written only at initialisation (as upstream); only the
addresses are re-synced, periodically.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from isthmus.ccm.errors import CCMError
from isthmus.ccm.kube.events import LOOKUP_FAILED, NORMAL, SYNCED, WARNING, EventSink, NoEvents
from isthmus.ccm.kube.informer import Backoff
from isthmus.ccm.kube.nodes import (
    ANNOTATION_PROVIDED_NODE_IP,
    BETA_LABELS,
    LABEL_INSTANCE_TYPE,
    LABEL_REGION,
    LABEL_ZONE,
    TAINT_UNINITIALIZED,
    CloudInstances,
    NodeAPI,
    NodeView,
    is_conflict,
    with_precondition,
)
from isthmus.ccm.openstack.instances import InstanceMetadata
from isthmus.ccm.openstack.model import HOSTNAME, NodeAddress

LOG = logging.getLogger(__name__)


def apply_provided_node_ips(addresses: Sequence[NodeAddress], annotation: str) -> list[NodeAddress]:
    """Honour kubelet ``--node-ip``: those addresses first, same-type others dropped.

    Every given IP must be among the cloud's addresses, else the Node cannot
    be initialised (an error, as upstream).
    """
    wanted = [ip.strip() for ip in annotation.split(",") if ip.strip()]
    if not wanted:
        return list(addresses)
    chosen: list[NodeAddress] = []
    for ip in wanted:
        match = next((a for a in addresses if a.address == ip), None)
        if match is None:
            raise CCMError(f"failed to get node address from cloud provider that matches ip: {ip}")
        chosen.append(match)
    types = {a.type for a in chosen}
    return chosen + [a for a in addresses if a not in chosen and a.type not in types]


def desired_addresses(node: NodeView, cloud: Sequence[NodeAddress]) -> list[NodeAddress]:
    """Cloud addresses, plus the kubelet's Hostname if the cloud gave none."""
    out = list(cloud)
    if not any(a.type == HOSTNAME for a in out):
        out += [a for a in node.addresses if a.type == HOSTNAME]
    annotation = node.annotations.get(ANNOTATION_PROVIDED_NODE_IP, "")
    return apply_provided_node_ips(out, annotation) if annotation else out


def init_patch(node: NodeView, meta: InstanceMetadata) -> dict[str, Any]:
    """The one merge patch that initialises ``node`` from cloud metadata."""
    labels: dict[str, str] = {}
    for label, value in ((LABEL_INSTANCE_TYPE, meta.instance_type), (LABEL_ZONE, meta.zone),
                         (LABEL_REGION, meta.region)):
        if value:  # empty values never touch labels
            labels[label] = labels[BETA_LABELS[label]] = value
    spec: dict[str, Any] = {"taints": [t for t in node.taints if t.get("key") != TAINT_UNINITIALIZED]}
    if not node.provider_id:
        spec["providerID"] = meta.provider_id
    patch: dict[str, Any] = {"spec": spec}
    if labels:
        patch["metadata"] = {"labels": labels}
    return with_precondition(node, patch)


def beta_to_ga_patch(node: NodeView) -> dict[str, Any] | None:
    """Copy beta label values to missing or different GA labels (upstream does this)."""
    labels = {ga: node.labels[beta] for ga, beta in BETA_LABELS.items()
              if beta in node.labels and node.labels.get(ga) != node.labels[beta]}
    return {"metadata": {"labels": labels}} if labels else None


@dataclass
class NodeController:
    nodes: NodeAPI
    cloud: CloudInstances
    backoff: Backoff = field(default_factory=Backoff)
    events: EventSink = field(default_factory=NoEvents)

    def sync(self, views: Iterable[NodeView]) -> None:
        """One pass over Nodes: initialise tainted ones (with backoff), fix labels of others.

        The service feeds Nodes one at a time through its work queue
        (:meth:`reconcile`); this pass is for tools and tests.
        """
        for node in views:
            if node.has_taint(TAINT_UNINITIALIZED) and not self.backoff.due(node.name):
                continue
            try:
                self.reconcile(node)
            except Exception as exc:  # noqa: BLE001 - any failure keeps the taint; retry later
                delay = self.backoff.failed(node.name)
                LOG.warning("node %s: initialisation failed (retry in %.1fs): %s", node.name, delay, exc)
            else:
                self.backoff.succeeded(node.name)

    def reconcile(self, node: NodeView) -> None:
        """What one Node needs: initialisation if tainted, else beta-to-GA labels.

        An untainted Node with right labels costs no call at all. Raises if
        initialisation failed (the caller retries with backoff).
        """
        if node.has_taint(TAINT_UNINITIALIZED):
            try:
                self.initialise(node)
            except Exception as exc:
                self.events.node_event(node, WARNING, LOOKUP_FAILED, f"initialisation failed: {exc}")
                raise
            return
        patch = beta_to_ga_patch(node)
        if patch:
            self.nodes.patch(node.name, patch)

    def initialise(self, node: NodeView, attempts: int = 20) -> None:
        """Look up, then patch; re-read and retry on a write conflict."""
        meta = self.cloud.instance_metadata(node.ref)
        if not meta.provider_id and not node.provider_id:
            raise CCMError("cloud gave no providerID and the node has none")
        addresses = desired_addresses(node, meta.addresses)  # validate before touching the Node
        for attempt in range(attempts):
            try:
                self.nodes.patch(node.name, init_patch(node, meta))
                break
            except Exception as exc:
                if not is_conflict(exc) or attempt == attempts - 1:
                    raise
                node = self.nodes.get(node.name)
                if not node.has_taint(TAINT_UNINITIALIZED):
                    return  # someone else initialised it meanwhile
        self.nodes.patch_addresses(node.name, addresses)
        provider_id = meta.provider_id or node.provider_id
        LOG.info("node %s: initialised in region %s (%s)", node.name, meta.region, provider_id)
        self.events.node_event(node, NORMAL, SYNCED, f"initialised from server {provider_id} in region {meta.region}")

    def update_addresses(self, views: Iterable[NodeView]) -> None:
        """Periodic re-sync of initialised Nodes' addresses; failures only log."""
        for node in views:
            if node.has_taint(TAINT_UNINITIALIZED):
                continue
            try:
                addresses = desired_addresses(node, self.cloud.instance_metadata(node.ref).addresses)
            except Exception as exc:  # noqa: BLE001 - keep the old addresses on any failure
                LOG.warning("node %s: address update skipped: %s", node.name, exc)
                continue
            if tuple(addresses) != node.addresses:
                self.nodes.patch_addresses(node.name, addresses)
                LOG.info("node %s: addresses updated", node.name)
