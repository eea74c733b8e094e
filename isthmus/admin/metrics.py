"""Prometheus metrics of the Admin API: ``GET /metrics`` and a request counter and
latency histogram per method, route and status (docs/metrics.md).

The outermost middleware: ``/metrics`` needs no token (as any exporter; bind the
API where scrapers may reach it) and every other request is timed whole,
authentication included. Routes are the API's templates (``/v1.0/pods/{id}``),
never raw paths, and methods one of the known set or ``other``, so label values
stay few whatever an unauthenticated client sends.

Under gunicorn with several workers, set ``PROMETHEUS_MULTIPROC_DIR`` (an
empty directory, prometheus_client's multiprocess mode): each worker writes
its samples there and any worker's ``/metrics`` answers for all of them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, make_wsgi_app

from isthmus.metric_labels import http_method

REQUESTS = Counter("isthmus_admin_requests", "Admin API requests answered, by method, route and status",
                   ("method", "route", "status"))
LATENCY = Histogram("isthmus_admin_request_seconds", "Seconds the Admin API took to answer, by method and route",
                    ("method", "route"), buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
COLLECTIONS = ("pods", "routings", "bindings", "jobs")
FIXED = ("detail", "schemas")


def route_of(path: str) -> str:
    """``/v1.0/jobs/8c1e...`` -> ``/v1.0/jobs/{id}``; anything unknown is ``other``."""
    parts = [p for p in path.split("/") if p]
    if not parts:
        return "/"
    if parts[0] != "v1.0" or len(parts) > 3 or (len(parts) > 1 and parts[1] not in COLLECTIONS):
        return "other"
    if len(parts) == 3 and parts[2] not in FIXED:
        parts[2] = "{id}"
    return "/" + "/".join(parts)


def _registry() -> CollectorRegistry:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return registry
    return REGISTRY


class MetricsMiddleware:
    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.exposition = make_wsgi_app(_registry())

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        method = environ.get("REQUEST_METHOD", "GET")
        if path.rstrip("/") == "/metrics" and method in ("GET", "HEAD"):
            return self.exposition(environ, start_response)
        started = time.monotonic()
        seen: dict[str, str] = {}

        def recording(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            seen["status"] = status.split(" ", 1)[0]
            return start_response(status, headers, exc_info) if exc_info else start_response(status, headers)

        try:
            return self.app(environ, recording)
        finally:
            route, label = route_of(path), http_method(method)  # before authentication: bounded labels
            REQUESTS.labels(label, route, seen.get("status", "500")).inc()
            LATENCY.labels(label, route).observe(time.monotonic() - started)
