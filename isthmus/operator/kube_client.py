"""A small asynchronous Kubernetes client: get, list, create, merge-patch, delete.

kopf watches and drives handlers but has no public client for other objects;
this one reuses kopf's login (:class:`kopf.ConnectionInfo`), so it talks to the
same API server with the same credentials (a service account in a cluster, a
kubeconfig on a laptop, the kmock emulator in tests).
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from isthmus.operator import GROUP, VERSION

Obj = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None, name: str | None = None, subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if subresource:
            base += f"/{subresource}"
        return base


CORE = {
    "Secret": Resource("", "v1", "secrets", "Secret"),
    "ConfigMap": Resource("", "v1", "configmaps", "ConfigMap"),
    "Service": Resource("", "v1", "services", "Service"),
    "Pod": Resource("", "v1", "pods", "Pod"),
    "Deployment": Resource("apps", "v1", "deployments", "Deployment"),
    "Job": Resource("batch", "v1", "jobs", "Job"),
    "PodDisruptionBudget": Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    "NetworkAttachmentDefinition": Resource("k8s.cni.cncf.io", "v1", "network-attachment-definitions",
                                            "NetworkAttachmentDefinition"),
    "OpenStackControlPlane": Resource("core.openstack.org", "v1beta1", "openstackcontrolplanes",
                                      "OpenStackControlPlane"),
    "Certificate": Resource("cert-manager.io", "v1", "certificates", "Certificate"),
    "CustomResourceDefinition": Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                         "CustomResourceDefinition", namespaced=False),
}


def isthmus_resources() -> dict[str, Resource]:
    from isthmus.operator.crds import KINDS

    return {kind: Resource(GROUP, VERSION, plural, kind) for kind, (plural, _, _) in KINDS.items()}


RESOURCES: dict[str, Resource] = {**CORE, **isthmus_resources()}


def resource_of(obj: Mapping[str, Any]) -> Resource:
    return RESOURCES[obj["kind"]]


class ApiError(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text[:300]}")
        self.status = status


def matches(obj: Mapping[str, Any], selector: Mapping[str, str] | None) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in (selector or {}).items())


class Kube:
    def __init__(self, server: str, token: str | None = None, ca_path: str | None = None,
                 ca_data: bytes | None = None, insecure: bool = False,
                 certificate_path: str | None = None, private_key_path: str | None = None) -> None:
        self.server = server.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._ssl: ssl.SSLContext | bool = True  # aiohttp's default (plain http ignores it)
        if self.server.startswith("https"):
            if insecure:
                self._ssl = False
            else:
                context = ssl.create_default_context(cafile=ca_path,
                                                     cadata=ca_data.decode() if ca_data else None)
                if certificate_path:
                    context.load_cert_chain(certificate_path, private_key_path)
                self._ssl = context
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_connection_info(cls, info: Any) -> Kube:
        """From a :class:`kopf.ConnectionInfo` (kopf's login result)."""
        return cls(info.server, token=info.token, ca_path=info.ca_path, ca_data=info.ca_data,
                   insecure=bool(info.insecure), certificate_path=info.certificate_path,
                   private_key_path=info.private_key_path)

    async def _request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                       params: Mapping[str, str] | None = None) -> Obj | None:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        headers = {**self._headers, "Content-Type": content_type}
        async with self._session.request(method, self.server + path, json=body, headers=headers,
                                         ssl=self._ssl, params=params) as response:
            if response.status == 404:
                return None
            if response.status >= 400:
                raise ApiError(response.status, await response.text())
            return await response.json(content_type=None)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def get(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        return await self._request("GET", RESOURCES[kind].path(namespace, name))

    async def list(self, kind: str, namespace: str | None, selector: Mapping[str, str] | None = None) -> list[Obj]:
        params = {"labelSelector": ",".join(f"{k}={v}" for k, v in selector.items())} if selector else None
        found = await self._request("GET", RESOURCES[kind].path(namespace), params=params) or {}
        # Filtered here too: the emulator of the test tier ignores label selectors.
        items = [item for item in found.get("items", []) if matches(item, selector)]
        for item in items:  # list items carry no kind; callers dispatch on it
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", RESOURCES[kind].api_version)
        return items

    async def create(self, obj: Obj) -> Obj:
        created = await self._request("POST", resource_of(obj).path(obj["metadata"].get("namespace")), obj)
        return created or obj

    async def patch(self, kind: str, namespace: str | None, name: str, patch: Obj,
                    subresource: str | None = None) -> Obj | None:
        return await self._request("PATCH", RESOURCES[kind].path(namespace, name, subresource), patch,
                                   content_type="application/merge-patch+json")

    async def delete(self, kind: str, namespace: str | None, name: str) -> None:
        await self._request("DELETE", RESOURCES[kind].path(namespace, name),
                            {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})


def secret_text(obj: Mapping[str, Any]) -> dict[str, str]:
    """A Secret's keys as text, from ``data`` (base64) and ``stringData``."""
    out = {key: base64.b64decode(value).decode() for key, value in (obj.get("data") or {}).items()}
    out.update(obj.get("stringData") or {})
    return out


def encode_secret(obj: Obj) -> Obj:
    """``stringData`` -> ``data`` as the API server stores it (so comparisons see what is stored)."""
    if obj.get("kind") != "Secret" or "stringData" not in obj:
        return obj
    out = {k: v for k, v in obj.items() if k != "stringData"}
    out["data"] = {key: base64.b64encode(value.encode()).decode() for key, value in obj["stringData"].items()}
    return out
