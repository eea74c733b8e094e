"""A thin HTTP client of the Admin API on the OSC keystoneauth session."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from osc_lib import exceptions

VERSION_PREFIX = "/v1.0"


class ApiError(exceptions.CommandError):
    """An error answer, with the server's message (which names the field at fault)."""

    def __init__(self, status: int, message: str, request_id: str | None = None) -> None:
        suffix = f" (HTTP {status}, request {request_id})" if request_id else f" (HTTP {status})"
        super().__init__(message + suffix)
        self.status = status
        self.message = message
        self.request_id = request_id


class Client:
    def __init__(self, session: Any, endpoint: str) -> None:
        self.session = session
        base = endpoint.rstrip("/")
        # Accept a catalog URL registered with or without the version.
        self.base = base if base.endswith(VERSION_PREFIX) else base + VERSION_PREFIX

    def request(self, method: str, path: str, body: Any = None,
                params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"raise_exc": False, "headers": {"Accept": "application/json"}}
        if body is not None:
            kwargs["json"] = body
        if params:
            kwargs["params"] = {k: v for k, v in params.items() if v is not None}
        resp = self.session.request(self.base + path, method, **kwargs)
        try:
            data = resp.json() if resp.content else {}
        except ValueError:
            data = None
        if resp.status_code >= 400:
            raise ApiError(resp.status_code, _message(data, resp.text), resp.headers.get("x-openstack-request-id"))
        return data or {}

    # -- pods --------------------------------------------------------------------
    def create_pod(self, **pod: str) -> dict[str, Any]:
        return self.request("POST", "/pods", {"pod": pod})["pod"]

    def list_pods(self) -> list[dict[str, Any]]:
        return self.request("GET", "/pods")["pods"]

    def get_pod(self, pod_id: str) -> dict[str, Any]:
        return self.request("GET", f"/pods/{pod_id}")["pod"]

    def delete_pod(self, pod_id: str) -> None:
        self.request("DELETE", f"/pods/{pod_id}")

    def find_pod(self, name_or_id: str) -> dict[str, Any]:
        """A pod by id or by region name."""
        for pod in self.list_pods():
            if name_or_id in (pod["pod_id"], pod["region_name"]):
                return pod
        raise exceptions.CommandError(f"no pod with id or region name {name_or_id!r}")

    # -- routings ------------------------------------------------------------------
    def create_routing(self, **routing: str) -> dict[str, Any]:
        return self.request("POST", "/routings", {"routing": routing})["routing"]

    def list_routings(self, filters: Mapping[str, Any] | None = None, limit: int | None = None,
                      marker: int | None = None) -> list[dict[str, Any]]:
        """One page if ``limit`` is given, else every page (following ``routings_links``)."""
        return self._collect("/routings", "routings", dict(filters or {}), limit, marker)

    def get_routing(self, routing_id: int | str) -> dict[str, Any]:
        return self.request("GET", f"/routings/{routing_id}")["routing"]

    def update_routing(self, routing_id: int | str, **changes: str) -> dict[str, Any]:
        return self.request("PUT", f"/routings/{routing_id}", {"routing": changes})["routing"]

    def delete_routing(self, routing_id: int | str) -> None:
        self.request("DELETE", f"/routings/{routing_id}")

    # -- bindings ----------------------------------------------------------------
    def create_binding(self, project_id: str, pod_id: str) -> dict[str, Any]:
        return self.request("POST", "/bindings", {"binding": {"project_id": project_id, "pod_id": pod_id}})["binding"]

    def list_bindings(self, filters: Mapping[str, Any] | None = None, limit: int | None = None,
                      marker: int | None = None) -> list[dict[str, Any]]:
        """One page if ``limit`` is given, else every page (following ``bindings_links``)."""
        return self._collect("/bindings", "bindings", dict(filters or {}), limit, marker)

    def get_binding(self, binding_id: int | str) -> dict[str, Any]:
        return self.request("GET", f"/bindings/{binding_id}")["binding"]

    def delete_binding(self, binding_id: int | str) -> None:
        self.request("DELETE", f"/bindings/{binding_id}")

    # -- jobs --------------------------------------------------------------------
    def job_schemas(self) -> list[dict[str, Any]]:
        return self.request("GET", "/jobs/schemas")["schemas"]

    def create_job(self, job_type: str, project_id: str, resource: Mapping[str, str]) -> dict[str, Any]:
        body = {"job": {"type": job_type, "project_id": project_id, "resource": dict(resource)}}
        return self.request("POST", "/jobs", body)["job"]

    def list_jobs(self, filters: Mapping[str, Any] | None = None, limit: int | None = None,
                  marker: str | None = None, detail: bool = False) -> list[dict[str, Any]]:
        path = "/jobs/detail" if detail else "/jobs"
        return self._collect(path, "jobs", dict(filters or {}), limit, marker)

    def get_job(self, job_id: str) -> dict[str, Any]:
        return self.request("GET", f"/jobs/{job_id}")["job"]

    def delete_job(self, job_id: str) -> None:
        self.request("DELETE", f"/jobs/{job_id}")

    def redo_job(self, job_id: str) -> dict[str, Any]:
        return self.request("PUT", f"/jobs/{job_id}")["job"]

    # -- paging --------------------------------------------------------------------
    def _collect(self, path: str, key: str, filters: dict[str, Any], limit: int | None,
                 marker: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            params = {**filters, "limit": limit, "marker": marker}
            data = self.request("GET", path, params=params)
            page = data.get(key, [])
            items += page
            if limit is not None or not page or not data.get(f"{key}_links"):
                return items
            marker = page[-1]["id"]


def _message(data: Any, text: str) -> str:
    """``{"badRequest": {"message": ..., "code": 400}}`` -> the message."""
    if isinstance(data, dict) and len(data) == 1:
        inner = next(iter(data.values()))
        if isinstance(inner, dict) and "message" in inner:
            return str(inner["message"])
    return text.strip()[:500] or "no details"
