"""The collector against a fake keystoneauth session: paging, bounded calls, a
failing region marked unhealthy while the rest of the model is built."""

from __future__ import annotations

import json
from typing import Any

import pytest
from keystoneauth1 import exceptions as ks_exc

from isthmus.topology import collect
from tests.unit.topology import fixtures as fx

ADMIN = "http://admin:19999/v1.0"


class Response:
    def __init__(self, status: int, body: Any) -> None:
        self.status_code = status
        self._body = body
        self.text = json.dumps(body)

    def json(self) -> Any:
        return self._body


class FakeSession:
    """Answers GETs from ``routes``: (service type, region, path) -> body or exception."""

    def __init__(self, routes: dict[tuple[str | None, str | None, str], Any]) -> None:
        self.routes = routes
        self.calls: list[dict[str, Any]] = []

    def get_endpoint(self, service_type: str, region_name: str, interface: str) -> str | None:
        return self.routes.get(("endpoint", region_name, service_type))

    def get(self, path: str, **kwargs: Any) -> Response:
        self.calls.append({"path": path, **kwargs})
        filt = kwargs.get("endpoint_filter") or {}
        key = (filt.get("service_type"), filt.get("region_name"), path)
        if path.startswith("http"):
            key = ("url", None, path)
        found = self.routes.get(key)
        if isinstance(found, Exception):
            raise found
        if found is None:
            return Response(404, {"NeutronError": {"message": f"no {path}"}})
        if isinstance(found, Response):
            return found
        if callable(found):
            found = found(kwargs.get("params") or {})
        return Response(200, found)


def routes_for(snapshot) -> dict:
    routes: dict = {
        ("endpoint", "CentralRegion", "multiregion"): "http://admin:19999/",
        ("url", None, ADMIN + "/pods"): {"pods": snapshot.pods},
        ("url", None, ADMIN + "/jobs/detail"): lambda params: {
            "jobs": [j for j in snapshot.jobs if j["status"].lower() == params["status"]]},
    }
    for region in [snapshot.central, *snapshot.regions]:
        routes[("network", region.name, "/v2.0/networks")] = {"networks": region.networks}
        routes[("network", region.name, "/v2.0/ports")] = {"ports": region.ports}
        routes[("network", region.name, "/v2.0/routers")] = {"routers": region.routers}
        routes[("compute", region.name, "/servers/detail")] = {"servers": region.servers}
    return routes


def test_reader_follows_next_links_and_bounds_each_call() -> None:
    session = FakeSession({
        ("network", "R", "/v2.0/ports"): {"ports": [{"id": "a"}], "ports_links": [
            {"rel": "next", "href": "http://n/v2.0/ports?marker=a"}]},
        ("url", None, "http://n/v2.0/ports?marker=a"): {"ports": [{"id": "b"}], "ports_links": [
            {"rel": "previous", "href": "http://n/x"}]},
    })
    reader = collect.Reader(session, "network", "R", "public", 2.5)
    assert [p["id"] for p in reader.list("/v2.0/ports", "ports")] == ["a", "b"]
    assert all(c["timeout"] == 2.5 and c["connect_retries"] == 0 for c in session.calls)


def test_collector_builds_the_tour() -> None:
    snap = fx.snapshot()
    collector = collect.Collector(FakeSession(routes_for(snap)), timeout=1)
    topo = collector.topology()
    assert [r.name for r in topo.regions] == ["CentralRegion", "RegionOne", "RegionTwo"]
    assert all(r.healthy for r in topo.regions)
    assert topo.networks[0].copies["RegionTwo"].shadows[0].id == fx.PORT1
    assert topo.jobs.backlog == 1 and topo.routers[0].halves.keys() == {"RegionOne", "RegionTwo"}


def test_a_region_that_refuses_is_unhealthy_not_fatal() -> None:
    routes = routes_for(fx.snapshot())
    routes[("network", "RegionTwo", "/v2.0/networks")] = ks_exc.ConnectFailure("refused")
    topo = collect.Collector(FakeSession(routes), timeout=1).topology()
    two = fx.region(topo, "RegionTwo")
    assert not two.healthy and "ConnectFailure" in two.errors["network"]
    assert fx.region(topo, "RegionOne").healthy
    assert topo.networks[0].copies["RegionTwo"].unknown


def test_a_nova_timeout_marks_its_region() -> None:
    routes = routes_for(fx.snapshot())
    routes[("compute", "RegionOne", "/servers/detail")] = ks_exc.ConnectTimeout("timed out")
    topo = collect.Collector(FakeSession(routes), timeout=1).topology()
    assert "compute" in fx.region(topo, "RegionOne").errors and fx.region(topo, "RegionTwo").healthy


def test_no_l3_is_no_routers() -> None:
    routes = routes_for(fx.snapshot())
    del routes[("network", "RegionOne", "/v2.0/routers")]
    topo = collect.Collector(FakeSession(routes), timeout=1).topology()
    assert fx.region(topo, "RegionOne").healthy and set(topo.routers[0].halves) == {"RegionTwo"}


def test_admin_api_forbidden_falls_back_to_the_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    routes = routes_for(fx.snapshot())
    routes[("url", None, ADMIN + "/pods")] = Response(403, {"forbidden": {"message": "no"}})
    collector = collect.Collector(FakeSession(routes), timeout=1)
    monkeypatch.setattr(collector, "catalog_regions", lambda: ["CentralRegion", "RegionOne", "RegionTwo"])
    topo = collector.topology()
    assert [r.name for r in topo.regions] == ["CentralRegion", "RegionOne", "RegionTwo"]
    assert fx.region(topo, "CentralRegion").healthy and "403" in (topo.jobs.error or "")


def test_admin_api_down_marks_central(monkeypatch: pytest.MonkeyPatch) -> None:
    routes = routes_for(fx.snapshot())
    routes[("url", None, ADMIN + "/pods")] = ks_exc.ConnectFailure("refused")
    collector = collect.Collector(FakeSession(routes), timeout=1)
    monkeypatch.setattr(collector, "catalog_regions", lambda: ["RegionOne"])
    topo = collector.topology()
    assert not fx.region(topo, "CentralRegion").healthy and [r.name for r in topo.regions][1:] == ["RegionOne"]


def test_regions_of_prefers_pods() -> None:
    assert collect.regions_of(fx.PODS, ["X"], "CentralRegion") == ["RegionOne", "RegionTwo"]
    assert collect.regions_of(None, ["CentralRegion", "X"], "CentralRegion") == ["X"]


def test_admin_endpoint_with_version_in_the_catalogue() -> None:
    routes = routes_for(fx.snapshot())
    routes[("endpoint", "CentralRegion", "multiregion")] = ADMIN + "/"
    assert collect.Collector(FakeSession(routes), timeout=1).topology().jobs.backlog == 1


def test_no_admin_endpoint_is_an_error_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    routes = routes_for(fx.snapshot())
    del routes[("endpoint", "CentralRegion", "multiregion")]
    collector = collect.Collector(FakeSession(routes), timeout=1)
    monkeypatch.setattr(collector, "catalog_regions", lambda: ["RegionOne"])
    topo = collector.topology()
    assert "no endpoint" in (topo.jobs.error or "") and not fx.region(topo, "CentralRegion").healthy
