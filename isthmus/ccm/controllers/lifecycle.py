"""Cloud node lifecycle controller: delete Nodes whose server is gone, taint shut-off ones.

Only NotReady Nodes cost a cloud call. A Node is deleted only on a clean
"does not exist" (every searched region answered); any error (a region down,
an unknown region, a foreign providerID) leaves it alone. A Node without a
providerID is not deleted unless asked (``delete_without_provider_id``):
a name that matches no server may just be a machine outside OpenStack
(upstream deletes it; kubernetes#141364 proposes not to).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from isthmus.ccm.kube.events import DELETING_NODE, LOOKUP_FAILED, NORMAL, WARNING, EventSink, NoEvents
from isthmus.ccm.kube.nodes import TAINT_SHUTDOWN, CloudInstances, NodeAPI, NodeView, with_precondition

LOG = logging.getLogger(__name__)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def shutdown_taint_patch(node: NodeView, present: bool) -> dict[str, Any] | None:
    """Add or remove the shutdown taint; None when nothing changes."""
    if node.has_taint(TAINT_SHUTDOWN) == present:
        return None
    taints = [t for t in node.taints if t.get("key") != TAINT_SHUTDOWN]
    if present:
        taints.append({"key": TAINT_SHUTDOWN, "effect": "NoSchedule", "timeAdded": _now()})
    return with_precondition(node, {"spec": {"taints": taints}})


@dataclass
class LifecycleController:
    nodes: NodeAPI
    cloud: CloudInstances
    delete_without_provider_id: bool = False
    events: EventSink = field(default_factory=NoEvents)

    def monitor(self, views: Iterable[NodeView]) -> None:
        for node in views:
            try:
                self.check(node)
            except Exception as exc:  # noqa: BLE001 - one Node's failure must not stop the pass
                LOG.warning("node %s: lifecycle check failed: %s", node.name, exc)

    def check(self, node: NodeView) -> None:
        if node.ready:
            self._set_shutdown_taint(node, False)  # no cloud call for Ready nodes
            return
        # One lookup answers both questions; errors propagate: never delete on doubt.
        try:
            shutdown = self.cloud.instance_shutdown_if_exists(node.ref)
        except Exception as exc:
            self.events.node_event(node, WARNING, LOOKUP_FAILED, f"NotReady node not checked, left alone: {exc}")
            raise
        if shutdown is None:
            if node.provider_id or self.delete_without_provider_id:
                LOG.warning("Deleting node %s because it does not exist in the cloud provider", node.name)
                self.events.node_event(node, NORMAL, DELETING_NODE,
                                       f"Deleting node {node.name} because it does not exist in the cloud provider")
                self.nodes.delete(node.name)
            else:
                LOG.warning("node %s: no server named so and no providerID; not deleting", node.name)
            return
        if shutdown:
            self._set_shutdown_taint(node, True)

    def _set_shutdown_taint(self, node: NodeView, present: bool) -> None:
        patch = shutdown_taint_patch(node, present)
        if patch is not None:
            self.nodes.patch(node.name, patch)
            LOG.info("node %s: shutdown taint %s", node.name, "added" if present else "removed")
