"""Services, their status and their Events through ``kubernetes.client.CoreV1Api``:
the service controller's Kubernetes side, and the Service informer's resource API."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

from isthmus.ccm.kube.nodes import MERGE_PATCH, WatchEvent, WatchHandle
from isthmus.ccm.openstack.loadbalancer import model as m

COMPONENT = "isthmus-ccm-service-controller"


class ServiceAPI:
    """Services, their status and their Events through ``kubernetes.client.CoreV1Api``.

    It is also the Service informer's resource API (``list_with_version``,
    ``watch``, ``stop_watch``). Every request carries ``_request_timeout``
    (``--kube-api-timeout``), as the Node API's do; a watch is bounded by
    ``timeout_seconds`` (the server ends it) and by ``read_timeout`` (no byte
    for that long ends it on our side).
    """

    def __init__(self, core: Any, timeout: float = 30.0) -> None:
        self.core = core
        self.timeout = timeout
        self._watching = WatchHandle()

    def list_with_version(self) -> tuple[list[m.ServiceView], str]:
        """Every Service and the list's resourceVersion, from which a watch continues."""
        found = self.core.list_service_for_all_namespaces(_request_timeout=self.timeout)
        return [m.service_view(s) for s in found.items], (found.metadata.resource_version or "")

    def list_services(self) -> list[m.ServiceView]:
        return self.list_with_version()[0]

    def watch(self, resource_version: str, timeout_seconds: int, read_timeout: float) -> Iterator[WatchEvent]:
        """Service events after ``resource_version`` (raises ``ApiException`` 410 when it is too old)."""
        return self._watching.stream(self.core.list_service_for_all_namespaces, m.service_view, resource_version,
                                     timeout_seconds, (min(self.timeout, read_timeout), read_timeout))

    def stop_watch(self) -> None:
        self._watching.stop()

    def list_nodes(self) -> list[m.LBNode]:
        """For a standalone pass only: the running controller reads the Node cache."""
        return [m.lb_node(n) for n in self.core.list_node(_request_timeout=self.timeout).items]

    def patch(self, service: m.ServiceView, patch: dict[str, Any]) -> None:
        self.core.patch_namespaced_service(service.name, service.namespace, patch, _content_type=MERGE_PATCH,
                                           _request_timeout=self.timeout)

    def patch_status(self, service: m.ServiceView, ingress: list[dict[str, str]]) -> None:
        body = {"status": {"loadBalancer": {"ingress": ingress}}}
        self.core.patch_namespaced_service_status(service.name, service.namespace, body,
                                                  _content_type=MERGE_PATCH, _request_timeout=self.timeout)

    def event(self, service: m.ServiceView, kind: str, reason: str, message: str) -> None:
        now = datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{service.name}.{uuid.uuid4().hex[:16]}", "namespace": service.namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Service", "namespace": service.namespace,
                               "name": service.name, "uid": service.uid},
            "reason": reason, "message": message[:1024], "type": kind,
            "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        self.core.create_namespaced_event(service.namespace, body, _request_timeout=self.timeout)
