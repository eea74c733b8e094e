"""``/metrics`` of the Admin API: request counts and latency per route after known requests."""

from __future__ import annotations

import pytest
import webob
from prometheus_client import REGISTRY

from isthmus.admin.metrics import route_of
from tests.unit.admin.test_pipeline import app, call  # noqa: F401 - the full pipeline fixture


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.mark.parametrize("path,route", [
    ("/", "/"), ("/v1.0", "/v1.0"), ("/v1.0/pods", "/v1.0/pods"), ("/v1.0/pods/abc", "/v1.0/pods/{id}"),
    ("/v1.0/jobs/detail", "/v1.0/jobs/detail"), ("/v1.0/jobs/schemas", "/v1.0/jobs/schemas"),
    ("/v1.0/jobs/8c1e/", "/v1.0/jobs/{id}"), ("/v1.0/nope", "other"), ("/etc/passwd", "other"),
    ("/v1.0/pods/a/b", "other"),
])
def test_routes_are_templates(path: str, route: str) -> None:
    assert route_of(path) == route


def test_requests_counted_and_scraped_without_a_token(app) -> None:  # noqa: F811 - the imported fixture, by name
    before_ok = value("isthmus_admin_requests_total", method="GET", route="/", status="200")
    before_401 = value("isthmus_admin_requests_total", method="GET", route="/v1.0/pods/{id}", status="401")
    before_seconds = value("isthmus_admin_request_seconds_count", method="GET", route="/")
    for _ in range(3):
        assert call(app, "GET", "/").status_int == 200
    assert call(app, "GET", "/v1.0/pods/p1").status_int == 401
    resp = call(app, "GET", "/metrics")
    assert resp.status_int == 200 and resp.content_type.startswith("text/plain")
    assert value("isthmus_admin_requests_total", method="GET", route="/", status="200") == before_ok + 3
    assert value("isthmus_admin_requests_total", method="GET", route="/v1.0/pods/{id}",
                 status="401") == before_401 + 1
    assert value("isthmus_admin_request_seconds_count", method="GET", route="/") == before_seconds + 3
    text = resp.text
    assert 'isthmus_admin_requests_total{method="GET",route="/",status="200"}' in text
    assert "isthmus_admin_request_seconds_bucket" in text


def test_metrics_is_get_only(app) -> None:  # noqa: F811 - the imported fixture, by name
    assert webob.Request.blank("/metrics", method="POST").get_response(app).status_int in (401, 404, 405)


def test_invented_methods_share_one_label(app) -> None:  # noqa: F811 - the imported fixture, by name
    """Issue 26 item 12: 40 unauthenticated requests with invented methods made 41
    method labels; now every unknown method counts as ``other``."""
    def samples() -> list:
        return [sample for metric in REGISTRY.collect() if metric.name == "isthmus_admin_requests"
                for sample in metric.samples if sample.name == "isthmus_admin_requests_total"]

    def others() -> float:
        return sum(s.value for s in samples() if s.labels["method"] == "other")

    before_methods, before_others = {s.labels["method"] for s in samples()}, others()
    for n in range(40):
        call(app, f"X{n}FOO", "/v1.0/pods")
    assert {s.labels["method"] for s in samples()} - before_methods <= {"other"}
    assert others() == before_others + 40
