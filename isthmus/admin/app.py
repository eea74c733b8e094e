"""The Admin API application: routes, authentication, authorisation, controllers.

``AdminApi`` is the innermost WSGI app; :mod:`isthmus.admin.wsgi` wraps it in
keystonemiddleware ``auth_token`` (with ``delay_auth_decision``, so that this app
answers 401 itself in the same JSON form as every other error), request ids,
a body size limit and proxy-header handling.

Order of checks for a request: version discovery (``GET /``, ``GET /v1.0``)
needs no token; anything else without a valid token is 401; then the matched
operation's policy rule (403); unknown paths and methods are 404/405 — but only
after the base ``admin_api`` rule, so a non-admin gets 403 for every request
under ``/v1.0/`` whatever it names.

Deliberate differences from Tricircle's Admin API (docs/admin-api.md):
- Every validation error is **400** naming the field, including a pod without
  ``region_name`` (Tricircle: 422).
- A non-admin gets **403** everywhere (Tricircle: 401 for pods, 403 otherwise);
  no or an invalid token gets 401 with ``WWW-Authenticate``.
- ``project_id`` (routing, binding and job lists, and every single-object call) is
  forced to the token's project only for callers that the
  ``admin_api:{routings,bindings,jobs}:all_projects`` rules do not allow to see every
  project. By default only admins reach the API and they may, so an admin's
  ``?project_id=X`` filter is honoured and no filter means all projects
  (Tricircle always forced the caller's project, which left an admin unable to
  list any tenant's routings).
- Jobs have one stable id per (type, resource) (docs/jobs.md): ``GET
  /jobs/{id}`` keeps working after success, and there is no separate job log,
  so the reference's "job in the log" cases do not arise; a SUCCESS job can be
  deleted (it only holds history).
- ``POST /jobs`` does not require a routing for the resource: Isthmus jobs
  reconcile central resources, which need not have a regional copy yet.
- A list carries a ``next`` link only when a next page exists (Tricircle: on
  every full page).
- Bindings (Trio2o's ``pod_binding``): ``{"binding": {project_id,
  pod_id}}``; the central pod, an unknown pod or a missing field is 400 (Trio2o:
  422), a duplicate 409. Listed oldest first, the order the gateway tries them.
"""

from __future__ import annotations

import json
import logging
import re
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
import webob
import webob.dec
from oslo_context import context as oslo_context
from oslo_policy import policy as oslo_policy

from isthmus import jobs, registry
from isthmus.admin import faults
from isthmus.admin.faults import ApiError, BadRequest, Forbidden, NotFound
from isthmus.admin.policy import ADMIN_API, BINDINGS_ALL_PROJECTS, JOBS_ALL_PROJECTS, ROUTINGS_ALL_PROJECTS
from isthmus.registry.bindings import Bindings

LOG = logging.getLogger(__name__)

VERSION_ID = "v1.0"
VERSION_UPDATED = "2025-06-01T00:00:00Z"
POD_FIELDS = ("region_name", "az_name", "pod_az_name", "dc_name")
ROUTING_FIELDS = ("top_id", "bottom_id", "pod_id", "project_id", "resource_type")
ROUTING_FILTERS = ("id", "top_id", "bottom_id", "pod_id", "project_id", "resource_type")
BINDING_FIELDS = ("project_id", "pod_id")
JOB_FIELDS = ("type", "project_id", "resource")
JOB_FILTERS = ("type", "status", "project_id", "resource_id")
PAGING = ("limit", "marker")

Body = dict[str, Any]
Handler = Callable[..., tuple[int, Body]]


@dataclass(frozen=True)
class Operation:
    rule: str | None  # None: public (version discovery)
    handler: Handler


@dataclass(frozen=True)
class Route:
    pattern: re.Pattern[str]
    operations: Mapping[str, Operation]  # HTTP method -> operation


class AdminApi:
    """The WSGI app behind auth_token. One instance serves every request (thread-safe:
    it holds only the engine-backed stores, the handler registry and the enforcer)."""

    def __init__(
        self,
        pods: registry.Registry,
        store: jobs.JobStore,
        handlers: jobs.HandlerRegistry,
        enforcer: oslo_policy.Enforcer,
        max_limit: int = 1000,
    ) -> None:
        self.registry = pods
        self.bindings = Bindings(pods.engine)
        self.store = store
        self.handlers = handlers
        self.enforcer = enforcer
        self.max_limit = max_limit
        self.routes = self._routes()

    def _routes(self) -> list[Route]:
        def route(path: str, **ops: Operation) -> Route:
            return Route(re.compile(f"^{path}$"), ops)

        op = Operation
        return [
            route("/", GET=op(None, self.versions)),
            route("/v1.0", GET=op(None, self.version)),
            route("/v1.0/pods", POST=op("admin_api:pods:create", self.create_pod),
                  GET=op("admin_api:pods:list", self.list_pods)),
            route("/v1.0/pods/(?P<pod_id>[^/]+)", GET=op("admin_api:pods:show", self.show_pod),
                  DELETE=op("admin_api:pods:delete", self.delete_pod)),
            route("/v1.0/routings", POST=op("admin_api:routings:create", self.create_routing),
                  GET=op("admin_api:routings:list", self.list_routings)),
            route("/v1.0/routings/(?P<routing_id>[^/]+)",
                  GET=op("admin_api:routings:show", self.show_routing),
                  PUT=op("admin_api:routings:update", self.update_routing),
                  DELETE=op("admin_api:routings:delete", self.delete_routing)),
            route("/v1.0/bindings", POST=op("admin_api:bindings:create", self.create_binding),
                  GET=op("admin_api:bindings:list", self.list_bindings)),
            route("/v1.0/bindings/(?P<binding_id>[^/]+)",
                  GET=op("admin_api:bindings:show", self.show_binding),
                  DELETE=op("admin_api:bindings:delete", self.delete_binding)),
            route("/v1.0/jobs/schemas", GET=op("admin_api:jobs:schemas", self.job_schemas)),
            route("/v1.0/jobs/detail", GET=op("admin_api:jobs:list", self.list_jobs_detail)),
            route("/v1.0/jobs", POST=op("admin_api:jobs:create", self.create_job),
                  GET=op("admin_api:jobs:list", self.list_jobs)),
            route("/v1.0/jobs/(?P<job_id>[^/]+)", GET=op("admin_api:jobs:show", self.show_job),
                  DELETE=op("admin_api:jobs:delete", self.delete_job),
                  PUT=op("admin_api:jobs:redo", self.redo_job)),
        ]

    # -- WSGI ----------------------------------------------------------------------

    @webob.dec.wsgify
    def __call__(self, req: webob.Request) -> webob.Response:
        started = time.monotonic()
        # Always a fresh context: it also replaces the thread's last one, which
        # oslo.log prefixes to every line (with its request id and user).
        ctx = oslo_context.RequestContext.from_environ(req.environ)
        try:
            status, body = self._dispatch(req, ctx)
            resp = webob.Response(json=body, status=status, charset="UTF-8")
            detail = ""
        except Exception as exc:  # noqa: BLE001 - every error becomes a JSON answer
            status = faults.status_of(exc) or 500
            if status >= 500:
                LOG.exception("%s %s failed", req.method, _raw_path(req))
                message = (f"internal error (request {req.environ.get('openstack.request_id', '-')}); "
                           "see the isthmus-admin log")
            else:
                message = faults.message_of(exc)
            headers = exc.headers if isinstance(exc, ApiError) else ()
            resp = faults.response(status, message, headers)
            detail = f": {message}"
        LOG.info("%s %s -> %d in %.3fs user=%s project=%s request=%s%s", req.method, _raw_path(req), resp.status_int,
                 time.monotonic() - started, ctx.user_id, ctx.project_id, ctx.request_id, detail)
        return resp

    def _dispatch(self, req: webob.Request, ctx: oslo_context.RequestContext) -> tuple[int, Body]:
        try:
            path = req.path_info.rstrip("/") or "/"
        except UnicodeDecodeError:
            raise BadRequest("path: not valid UTF-8 once percent-decoded") from None
        route, params = self._match(path)
        operation = route.operations.get(req.method) if route else None
        if operation is not None and operation.rule is None:
            return operation.handler(req)
        if route is not None and route.operations and all(o.rule is None for o in route.operations.values()):
            raise self._not_allowed(route, req)  # public route, other method: no token needed to learn that
        if req.environ.get("HTTP_X_IDENTITY_STATUS") != "Confirmed":
            raise ApiError(401, "authentication required: send a valid Keystone token in X-Auth-Token")
        if route is None or operation is None:
            self._authorize(ctx, ADMIN_API)
            if route is None:
                raise NotFound(f"no resource at {req.path_info}")
            raise self._not_allowed(route, req)
        self._authorize(ctx, operation.rule)
        return operation.handler(req, ctx, **params)

    def _match(self, path: str) -> tuple[Route | None, dict[str, str]]:
        for route in self.routes:
            found = route.pattern.match(path)
            if found:
                return route, {k: urllib.parse.unquote(v) for k, v in found.groupdict().items()}
        return None, {}

    @staticmethod
    def _not_allowed(route: Route, req: webob.Request) -> ApiError:
        allowed = ", ".join(sorted(route.operations))
        return ApiError(405, f"method {req.method} not allowed on {req.path_info} (allowed: {allowed})",
                        [("Allow", allowed)])

    def _authorize(self, ctx: oslo_context.RequestContext, rule: str | None) -> None:
        assert rule is not None
        if not self._allowed(ctx, rule):
            raise Forbidden(f"policy does not allow {rule} (the Admin API needs the admin role)")

    def _allowed(self, ctx: oslo_context.RequestContext, rule: str) -> bool:
        target = {"project_id": ctx.project_id}
        return bool(self.enforcer.authorize(rule, target, ctx, do_raise=False))

    # -- versions ------------------------------------------------------------------

    def _version_doc(self, req: webob.Request, extra_links: Iterable[str] = ()) -> Body:
        base = f"{req.application_url}/{VERSION_ID}"
        links = [{"rel": "self", "href": f"{base}/"}]
        links += [{"rel": name, "href": f"{base}/{name}"} for name in extra_links]
        return {"id": VERSION_ID, "status": "CURRENT", "updated": VERSION_UPDATED, "links": links}

    def versions(self, req: webob.Request) -> tuple[int, Body]:
        return 200, {"versions": [self._version_doc(req)]}

    def version(self, req: webob.Request) -> tuple[int, Body]:
        return 200, {"version": self._version_doc(req, ("pods", "routings", "bindings", "jobs"))}

    # -- pods ----------------------------------------------------------------------

    def create_pod(self, req: webob.Request, ctx: Any) -> tuple[int, Body]:
        body = _body(req, "pod")
        _known_fields(body, POD_FIELDS, "pod")
        pod = self.registry.create_pod(
            body.get("region_name"), **{k: body[k] for k in POD_FIELDS[1:] if k in body})
        LOG.info("pod %s created: region %s, az %r", pod.pod_id, pod.region_name, pod.az_name)
        return 200, {"pod": pod.to_dict()}

    def list_pods(self, req: webob.Request, ctx: Any) -> tuple[int, Body]:
        _query(req, ())
        return 200, {"pods": [p.to_dict() for p in self.registry.pods()]}

    def show_pod(self, req: webob.Request, ctx: Any, pod_id: str) -> tuple[int, Body]:
        return 200, {"pod": self.registry.get_pod(pod_id).to_dict()}

    def delete_pod(self, req: webob.Request, ctx: Any, pod_id: str) -> tuple[int, Body]:
        self.registry.delete_pod(pod_id)
        LOG.info("pod %s deleted", pod_id)
        return 200, {}

    # -- routings ------------------------------------------------------------------

    def _routing(self, ctx: Any, routing_id: str) -> registry.Routing:
        number = _object_id(routing_id)
        if number is None:
            raise NotFound(f"routing {routing_id} not found")
        found = self.registry.get_routing(number)
        if not self._sees_project(ctx, ROUTINGS_ALL_PROJECTS, found.project_id):
            raise NotFound(f"routing {routing_id} not found")
        return found

    def _sees_project(self, ctx: Any, rule: str, project_id: str | None) -> bool:
        return project_id == ctx.project_id or self._allowed(ctx, rule)

    def _own_project_only(self, ctx: Any, rule: str, project_id: Any, what: str) -> None:
        if isinstance(project_id, str) and not self._sees_project(ctx, rule, project_id):
            raise Forbidden(f"project_id: you may only {what} in your own project ({ctx.project_id})")

    def create_routing(self, req: webob.Request, ctx: Any) -> tuple[int, Body]:
        body = _body(req, "routing")
        _known_fields(body, ROUTING_FIELDS, "routing")
        missing = [f for f in ROUTING_FIELDS if f not in body]
        if missing:
            raise BadRequest(f"routing: missing field(s) {', '.join(missing)}")
        self._own_project_only(ctx, ROUTINGS_ALL_PROJECTS, body["project_id"], "create routings")
        if body["bottom_id"] is None:
            raise BadRequest("bottom_id: is required")
        routing = self.registry.create_routing(**body)
        return 200, {"routing": routing.to_dict()}

    def list_routings(self, req: webob.Request, ctx: Any) -> tuple[int, Body]:
        query = _query(req, ROUTING_FILTERS)
        filters: dict[str, Any] = {k: v for k, v in query.items() if k not in PAGING}
        if "id" in filters:
            filters["id"] = _integer("id", filters["id"])
        if not self._allowed(ctx, ROUTINGS_ALL_PROJECTS):
            filters["project_id"] = ctx.project_id
        marker = _integer("marker", query["marker"]) if "marker" in query else None

        def page(size: int, after: int | None) -> list[registry.Routing]:
            try:
                return self.registry.list_routings(filters, size, after)
            except registry.NotFound:
                raise BadRequest(f"marker: no routing {after}") from None

        return 200, self._paged(req, "routings", query, registry.MAX_LIMIT, marker, page, registry.Routing.to_dict)

    def show_routing(self, req: webob.Request, ctx: Any, routing_id: str) -> tuple[int, Body]:
        return 200, {"routing": self._routing(ctx, routing_id).to_dict()}

    def update_routing(self, req: webob.Request, ctx: Any, routing_id: str) -> tuple[int, Body]:
        body = _body(req, "routing")
        _known_fields(body, ROUTING_FIELDS, "routing")
        if not body:
            raise BadRequest(f"routing: give at least one of {', '.join(ROUTING_FIELDS)}")
        current = self._routing(ctx, routing_id)
        if "project_id" in body:
            self._own_project_only(ctx, ROUTINGS_ALL_PROJECTS, body["project_id"], "move routings")
        for key, value in body.items():
            if value is None:
                raise BadRequest(f"{key}: must be a non-empty string")
        try:
            updated = self.registry.update_routing(current.id, body)
        except sa.exc.IntegrityError as err:  # the new (top_id, pod_id, resource_type) is taken
            raise ApiError(409, f"routing: another routing maps {body.get('top_id', current.top_id)} "
                                f"in pod {body.get('pod_id', current.pod_id)}") from err
        LOG.info("routing %s updated: %s", current.id, ", ".join(sorted(body)))
        return 200, {"routing": updated.to_dict()}

    def delete_routing(self, req: webob.Request, ctx: Any, routing_id: str) -> tuple[int, Body]:
        found = self._routing(ctx, routing_id)
        self.registry.delete_routing(found.id)
        return 200, {}

    # -- bindings ------------------------------------------------------------------

    def _binding(self, ctx: Any, binding_id: str) -> registry.Binding:
        number = _object_id(binding_id)
        if number is None:
            raise NotFound(f"binding {binding_id} not found")
        found = self.bindings.get(number)
        if not self._sees_project(ctx, BINDINGS_ALL_PROJECTS, found.project_id):
            raise NotFound(f"binding {binding_id} not found")
        return found

    def create_binding(self, req: webob.Request, ctx: Any) -> tuple[int, Body]:
        body = _body(req, "binding")
        _known_fields(body, BINDING_FIELDS, "binding")
        self._own_project_only(ctx, BINDINGS_ALL_PROJECTS, body.get("project_id"), "bind")
        binding = self.bindings.create(body.get("project_id"), body.get("pod_id"))
        LOG.info("binding %s created: project %s -> pod %s", binding.id, binding.project_id, binding.pod_id)
        return 200, {"binding": binding.to_dict()}

    def list_bindings(self, req: webob.Request, ctx: Any) -> tuple[int, Body]:
        query = _query(req, BINDING_FIELDS)
        project_id = query.get("project_id")
        if not self._allowed(ctx, BINDINGS_ALL_PROJECTS):
            project_id = ctx.project_id
        marker = _integer("marker", query["marker"]) if "marker" in query else None

        def page(size: int, after: int | None) -> list[registry.Binding]:
            try:
                return self.bindings.list(project_id, query.get("pod_id"), size, after)
            except registry.NotFound:
                raise BadRequest(f"marker: no binding {after}") from None

        return 200, self._paged(req, "bindings", query, registry.MAX_LIMIT, marker, page, registry.Binding.to_dict)

    def show_binding(self, req: webob.Request, ctx: Any, binding_id: str) -> tuple[int, Body]:
        return 200, {"binding": self._binding(ctx, binding_id).to_dict()}

    def delete_binding(self, req: webob.Request, ctx: Any, binding_id: str) -> tuple[int, Body]:
        found = self._binding(ctx, binding_id)
        self.bindings.delete(found.id)
        LOG.info("binding %s deleted: project %s -> pod %s", found.id, found.project_id, found.pod_id)
        return 200, {}

    # -- jobs ----------------------------------------------------------------------

    def job_schemas(self, req: webob.Request, ctx: Any) -> tuple[int, Body]:
        return 200, {"schemas": [{"type": t, "resource": list(keys)} for t, keys in self.handlers.schemas().items()]}

    def _spec(self, job_type: Any) -> jobs.HandlerSpec:
        if not isinstance(job_type, str) or not job_type:
            raise BadRequest("type: is required")
        try:
            return self.handlers.get(job_type)
        except jobs.UnknownJobType:
            known = ", ".join(self.handlers.job_types()) or "none registered"
            raise BadRequest(f"type: unknown job type {job_type!r} (known: {known})") from None

    def create_job(self, req: webob.Request, ctx: Any) -> tuple[int, Body]:
        body = _body(req, "job")
        _known_fields(body, JOB_FIELDS, "job")
        spec = self._spec(body.get("type"))
        project_id = body.get("project_id")
        if not isinstance(project_id, str) or not project_id.strip():
            raise BadRequest("project_id: is required")
        self._own_project_only(ctx, JOBS_ALL_PROJECTS, project_id, "create jobs")
        if "resource" not in body:
            raise BadRequest(f"resource: is required (type {spec.job_type} takes {', '.join(spec.resource_keys)})")
        resource_id = spec.join_resource(body["resource"])
        job = self.store.submit(jobs.JobRequest(spec.job_type, resource_id, project_id.strip()))
        LOG.info("job %s queued: %s %s (status %s)", job.id, job.job_type, job.resource_id, job.status.value)
        return 200, {"job": self._job_view(job, detail=True)}

    def list_jobs(self, req: webob.Request, ctx: Any) -> tuple[int, Body]:
        return self._list_jobs(req, ctx, detail=False)

    def list_jobs_detail(self, req: webob.Request, ctx: Any) -> tuple[int, Body]:
        return self._list_jobs(req, ctx, detail=True)

    def _list_jobs(self, req: webob.Request, ctx: Any, detail: bool) -> tuple[int, Body]:
        query = _query(req, JOB_FILTERS)
        project_id = query.get("project_id")
        if not self._allowed(ctx, JOBS_ALL_PROJECTS):
            project_id = ctx.project_id
        filters = jobs.JobFilter(status=query.get("status"), job_type=query.get("type"),
                                 project_id=project_id, resource_id=query.get("resource_id"))
        body = self._paged(req, "jobs", query, jobs.store.MAX_PAGE, query.get("marker"),
                           lambda size, after: self.store.list(filters, limit=size, marker=after),
                           lambda job: self._job_view(job, detail), collection="jobs/detail" if detail else "jobs")
        return 200, body

    def _job(self, ctx: Any, job_id: str) -> jobs.Job:
        job = self.store.get(job_id)
        if not self._sees_project(ctx, JOBS_ALL_PROJECTS, job.project_id):
            raise jobs.JobNotFound(job_id)
        return job

    def show_job(self, req: webob.Request, ctx: Any, job_id: str) -> tuple[int, Body]:
        return 200, {"job": self._job_view(self._job(ctx, job_id), detail=True)}

    def delete_job(self, req: webob.Request, ctx: Any, job_id: str) -> tuple[int, Body]:
        self.store.delete(self._job(ctx, job_id).id)
        LOG.info("job %s deleted", job_id)
        return 200, {}

    def redo_job(self, req: webob.Request, ctx: Any, job_id: str) -> tuple[int, Body]:
        job = self.store.redo(self._job(ctx, job_id).id)
        LOG.info("job %s re-queued", job_id)
        return 200, {"job": self._job_view(job, detail=True)}

    def _job_view(self, job: jobs.Job, detail: bool) -> Body:
        if job.job_type in self.handlers:
            resource = self.handlers.get(job.job_type).split_resource(job.resource_id)
        else:  # queued by a component whose handlers this API process did not load
            resource = {"resource_id": job.resource_id}
        view: Body = {
            "id": job.id,
            "type": job.job_type,
            "project_id": job.project_id,
            "status": job.status.value,
            "timestamp": job.updated_at.isoformat(),
            "resource": resource,
        }
        if detail:
            full = job.to_dict()
            full.pop("type", None)
            view = {**view, **full}
        return view

    # -- paging --------------------------------------------------------------------

    def _paged(self, req: webob.Request, key: str, query: Mapping[str, str], store_max: int, marker: Any,
               page: Callable[[int, Any], Sequence[Any]], view: Callable[[Any], Body],
               collection: str | None = None) -> Body:
        """One page of ``key`` after ``marker``, and a ``next`` link only when one more
        item exists past its last (asked for with a page of one)."""
        limit = self._limit(query.get("limit"), store_max)
        items = page(limit, marker)
        body: Body = {key: [view(item) for item in items]}
        if len(items) == limit and page(1, items[-1].id):
            body[f"{key}_links"] = [self._next(req, collection or key, query, limit, items[-1].id)]
        return body

    def _limit(self, value: str | None, store_max: int) -> int:
        cap = min(self.max_limit, store_max)
        if value is None:
            return cap
        count = _integer("limit", value)
        if count < 1:
            raise BadRequest("limit: must be a positive integer")
        return min(count, cap)

    @staticmethod
    def _next(req: webob.Request, collection: str, query: Mapping[str, str], limit: int, marker: Any) -> Body:
        params = {k: v for k, v in query.items() if k not in PAGING}
        params.update(limit=str(limit), marker=str(marker))
        href = f"{req.application_url}/{VERSION_ID}/{collection}?{urllib.parse.urlencode(sorted(params.items()))}"
        return {"rel": "next", "href": href}


# -- request parsing helpers -------------------------------------------------------


def _body(req: webob.Request, key: str) -> Body:
    shape = f'body: expected a JSON object {{"{key}": {{...}}}}'
    if not req.body:
        raise BadRequest(shape)
    try:
        data = json.loads(req.body)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("body: not valid JSON") from None
    except RecursionError:  # Python's parser gives up on deep nesting: refuse it, don't crash
        raise BadRequest("body: JSON nested too deeply") from None
    if not isinstance(data, dict) or key not in data:
        raise BadRequest(shape)
    extra = sorted(set(data) - {key})
    if extra:
        raise BadRequest(f"body: unexpected key(s) {', '.join(extra)} next to {key!r}")
    if not isinstance(data[key], dict):
        raise BadRequest(f"{key}: must be an object")
    _no_lone_surrogates(data[key], key)
    return data[key]


def _no_lone_surrogates(value: Any, where: str) -> None:
    """JSON may escape half a UTF-16 pair ("\\ud800"); no database can store it."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise BadRequest(f"{where}: not a valid Unicode string") from None
    elif isinstance(value, dict):
        for k, v in value.items():
            _no_lone_surrogates(k, where)
            _no_lone_surrogates(v, f"{where}.{k}")
    elif isinstance(value, list):
        for n, v in enumerate(value):
            _no_lone_surrogates(v, f"{where}[{n}]")


def _known_fields(body: Mapping[str, Any], allowed: Iterable[str], what: str) -> None:
    allowed = tuple(allowed)
    extra = sorted(set(body) - set(allowed))
    if extra:
        raise BadRequest(f"{what}: unknown field(s) {', '.join(extra)} (allowed: {', '.join(allowed)})")


def _query(req: webob.Request, filters: Iterable[str]) -> dict[str, str]:
    """Query parameters: each at most once, and only known filters or limit/marker."""
    filters = tuple(filters)
    out: dict[str, str] = {}
    try:
        given = list(req.GET.items())
    except UnicodeDecodeError:
        raise BadRequest("query: not valid UTF-8 once percent-decoded") from None
    for key, value in given:
        if key in out:
            raise BadRequest(f"{key}: given more than once")
        out[key] = value
    unknown = sorted(set(out) - set(filters) - (set(PAGING) if filters else set()))
    if unknown:
        supported = ", ".join((*filters, *PAGING)) if filters else "none"
        raise BadRequest(f"unsupported filter(s): {', '.join(unknown)} (supported: {supported})")
    return out


# Ids and paging numbers are 64-bit signed integers in every database the registry runs on.
MIN_ID, MAX_ID = -(2**63), 2**63 - 1


def _integer(name: str, value: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BadRequest(f"{name}: must be an integer, got {value!r}") from None
    if not MIN_ID <= number <= MAX_ID:
        raise BadRequest(f"{name}: {value} is out of range (a 64-bit integer)")
    return number


def _object_id(value: str) -> int | None:
    """A routing's or binding's id from the URL; None if it cannot be one (its GET is then a 404)."""
    try:
        number = int(value)
    except ValueError:
        return None
    return number if MIN_ID <= number <= MAX_ID else None


def _raw_path(req: webob.Request) -> str:
    """The path and query as sent, for logs (decoding them may be what failed)."""
    query = req.environ.get("QUERY_STRING")
    return req.environ.get("PATH_INFO", "") + (f"?{query}" if query else "")
