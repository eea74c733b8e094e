"""Prometheus metrics of the gateway (docs/metrics.md): requests it answers, the
calls it makes to each region's Nova/Cinder, and the state of each region
breaker; served at ``GET /metrics`` of the gateway itself.

Which API (compute, volume) an outbound call serves is the inbound request's:
a context variable set once the path is matched, which every task the request
starts inherits, so Upstream needs no extra argument.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from isthmus.metric_labels import http_method

BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
BREAKER_STATES = {"closed": 0, "half_open": 1, "open": 2}

CURRENT_API: ContextVar[str] = ContextVar("isthmus_gateway_api", default="none")

REQUESTS = Counter("isthmus_gateway_requests", "Requests the gateway answered, by API, method and status",
                   ("api", "method", "status"))
REQUEST_SECONDS = Histogram("isthmus_gateway_request_seconds", "Seconds the gateway took to answer, by API",
                            ("api",), buckets=BUCKETS)
UPSTREAM = Counter("isthmus_gateway_upstream_requests",
                   "Calls to a region, by region, API and result (HTTP status, or unavailable: refused, "
                   "timed out or breaker open)", ("region", "api", "result"))
UPSTREAM_SECONDS = Histogram("isthmus_gateway_upstream_request_seconds",
                             "Seconds a call to a region took (answered calls), by region and API",
                             ("region", "api"), buckets=BUCKETS)


def observe_request(api: str, method: str, status: int, seconds: float) -> None:
    REQUESTS.labels(api, http_method(method), str(status)).inc()
    REQUEST_SECONDS.labels(api).observe(seconds)


def observe_upstream(region: str, result: str, seconds: float | None) -> None:
    api = CURRENT_API.get()
    UPSTREAM.labels(region, api, result).inc()
    if seconds is not None:
        UPSTREAM_SECONDS.labels(region, api).observe(seconds)


class BreakerCollector(Collector):
    """``isthmus_gateway_breaker_state{region, endpoint}``: 0 closed, 1 half-open, 2 open;
    read from the live breakers at each scrape."""

    def __init__(self, breakers: Callable[[], Mapping[str, Any]]) -> None:
        self.breakers = breakers

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("isthmus_gateway_breaker_state",
                                   "Breaker of a region's service: 0 closed, 1 half-open, 2 open",
                                   labels=("region", "endpoint"))
        for key, breaker in sorted(self.breakers().items()):
            region, _, endpoint = key.partition(" ")
            family.add_metric((region, endpoint), BREAKER_STATES[breaker.state()])
        yield family


def exposition(breakers: Callable[[], Mapping[str, Any]]) -> tuple[bytes, str]:
    """The text of ``/metrics``: the process's metrics plus this gateway's breakers."""
    from prometheus_client import CollectorRegistry

    extra = CollectorRegistry(auto_describe=False)
    extra.register(BreakerCollector(breakers))
    return generate_latest(REGISTRY) + generate_latest(extra), CONTENT_TYPE_LATEST
