"""Kubernetes Events on Nodes, for what users must see in ``kubectl describe node``.

``core/v1`` Events (what ``kubectl describe`` and ``kubectl get events``
show) from the component ``isthmus-cloud-controller-manager``, in the
``default`` namespace as the kubelet's Node events are. Reasons:

* ``Synced`` (Normal): the Node was initialised from its server;
* ``LookupFailed`` (Warning): the cloud lookup failed; the message names the
  region (``region RegionTwo: ...``) or says the server is nowhere;
* ``DeletingNode`` (Normal): the Node is deleted because its server is gone.

A failing Node is retried from 5 ms on, so the same event would be written
many times: like client-go's correlator, one (Node, reason) is written at
most once per ``repeat_after``; repeats in between are only counted, and the
next write patches the same Event's ``count``, ``message`` and
``lastTimestamp``. Writing an Event never fails the work that caused it.
"""

from __future__ import annotations

import datetime
import logging
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from isthmus.ccm.kube.nodes import MERGE_PATCH, NodeView

LOG = logging.getLogger(__name__)

COMPONENT = "isthmus-cloud-controller-manager"
NORMAL, WARNING = "Normal", "Warning"
SYNCED, LOOKUP_FAILED, DELETING_NODE = "Synced", "LookupFailed", "DeletingNode"


class EventSink(Protocol):
    def node_event(self, node: NodeView, type_: str, reason: str, message: str) -> None: ...


class NoEvents:
    def node_event(self, node: NodeView, type_: str, reason: str, message: str) -> None:
        pass


@dataclass
class _Record:
    name: str  # the Event object's name
    count: int  # occurrences so far, written or not
    written_at: float  # local monotonic time of the last write


def _timestamp(now: datetime.datetime) -> str:
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class NodeEvents:
    """Writes deduplicated Node Events through ``kubernetes.client.CoreV1Api``."""

    core: Any
    instance: str = field(default_factory=socket.gethostname)  # reportingInstance / source.host
    namespace: str = "default"
    repeat_after: float = 300.0
    timeout: float = 10.0
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)
    on_written: Callable[[str], None] = lambda reason: None
    _records: dict[tuple[str, str], _Record] = field(default_factory=dict)

    def node_event(self, node: NodeView, type_: str, reason: str, message: str) -> None:
        if reason == SYNCED:
            self.forget(node.name)  # a later failure is news again: write it at once
        key = (node.name, reason)
        record = self._records.get(key)
        now = self.clock()
        if record is not None:
            record.count += 1
            if now - record.written_at < self.repeat_after:
                return  # counted; written with the next write
        try:
            if record is not None and self._bump(record, message):
                record.written_at = now
            else:
                self._records[key] = self._create(node, type_, reason, message, now)
            self.on_written(reason)
        except Exception as exc:  # noqa: BLE001 - an Event is never worth failing the work for
            LOG.debug("node %s: event %s not written: %s", node.name, reason, exc)

    def forget(self, node_name: str) -> None:
        for key in [k for k in self._records if k[0] == node_name]:
            del self._records[key]

    def _create(self, node: NodeView, type_: str, reason: str, message: str, now: float) -> _Record:
        stamp = _timestamp(self.wall_clock())
        name = f"{node.name}.{uuid.uuid4().hex[:16]}"
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": self.namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node.name,
                               **({"uid": node.uid} if node.uid else {})},
            "type": type_, "reason": reason, "message": message[:1024],
            "source": {"component": COMPONENT, "host": self.instance},
            "reportingComponent": COMPONENT, "reportingInstance": self.instance,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        self.core.create_namespaced_event(self.namespace, body, _request_timeout=self.timeout)
        return _Record(name, 1, now)

    def _bump(self, record: _Record, message: str) -> bool:
        """Count up the existing Event; False if it is gone (expired: create anew)."""
        patch = {"count": record.count, "message": message[:1024], "lastTimestamp": _timestamp(self.wall_clock())}
        try:
            self.core.patch_namespaced_event(record.name, self.namespace, patch, _content_type=MERGE_PATCH,
                                             _request_timeout=self.timeout)
        except Exception as exc:
            if getattr(exc, "status", None) == 404:
                return False
            raise
        return True
