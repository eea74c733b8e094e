"""The OSC plugin's client against the in-process API, and endpoint lookup."""

from __future__ import annotations

import json
import urllib.parse
from types import SimpleNamespace

import pytest
import webob
from osc_lib import exceptions

from isthmus.cli.osc import plugin
from isthmus.cli.osc.client import ApiError, Client


class WsgiSession:
    """Just enough of keystoneauth's Session.request, answered by a WSGI app."""

    def __init__(self, app, headers):
        self.app = app
        self.headers = headers
        self.calls = []

    def request(self, url, method, json=None, params=None, raise_exc=True, headers=None):
        if params:
            url += "?" + urllib.parse.urlencode(params)
        self.calls.append((method, url))
        req = webob.Request.blank(url.replace("http://admin.example:19999", ""), method=method)
        req.headers.update(self.headers)
        if json is not None:
            req.body = _dumps(json)
            req.content_type = "application/json"
        resp = req.get_response(self.app)
        return SimpleNamespace(status_code=resp.status_int, content=resp.body, text=resp.text,
                               headers={"x-openstack-request-id": "req-test"},
                               json=lambda: _loads(resp.body))


def _dumps(value):
    return json.dumps(value).encode()


def _loads(body):
    return json.loads(body)


@pytest.fixture
def session(api):
    return WsgiSession(api, {"X-Identity-Status": "Confirmed", "X-Roles": "admin", "X-Project-Id": "p"})


@pytest.mark.parametrize("endpoint", ["http://admin.example:19999", "http://admin.example:19999/",
                                      "http://admin.example:19999/v1.0", "http://admin.example:19999/v1.0/"])
def test_endpoint_with_or_without_version(session, endpoint):
    assert Client(session, endpoint).list_pods() == []
    assert session.calls == [("GET", "http://admin.example:19999/v1.0/pods")]


def test_pods_by_id_or_region_name(session):
    client = Client(session, "http://admin.example:19999")
    made = client.create_pod(region_name="RegionOne", az_name="az1")
    assert client.find_pod("RegionOne") == made == client.find_pod(made["pod_id"]) == client.get_pod(made["pod_id"])
    with pytest.raises(exceptions.CommandError, match="no pod with id or region name 'Nope'"):
        client.find_pod("Nope")


def test_errors_carry_the_servers_message(session):
    client = Client(session, "http://admin.example:19999")
    with pytest.raises(ApiError) as err:
        client.create_pod(az_name="az1")
    assert (err.value.status, err.value.message) == (400, "region_name: is required")
    assert str(err.value) == "region_name: is required (HTTP 400, request req-test)"


def test_list_follows_next_links_unless_limited(session, api):
    client = Client(session, "http://admin.example:19999")
    pod = client.create_pod(region_name="RegionOne", az_name="az1")["pod_id"]
    for n in range(5):
        client.create_routing(top_id=f"t{n}", bottom_id=f"b{n}", pod_id=pod, project_id="x", resource_type="network")
    api.max_limit = 2
    assert [r["top_id"] for r in client.list_routings()] == ["t4", "t3", "t2", "t1", "t0"]
    assert len([c for c in session.calls if c[0] == "GET" and "/v1.0/routings" in c[1]]) == 3
    assert [r["top_id"] for r in client.list_routings(limit=2, marker=4)] == ["t2", "t1"]


def test_bindings(session, api):
    client = Client(session, "http://admin.example:19999")
    client.create_pod(region_name="CentralRegion")
    pods = [client.create_pod(region_name=f"Region{n}", az_name=f"az{n}")["pod_id"] for n in range(3)]
    made = [client.create_binding("p", pod) for pod in pods]
    assert client.get_binding(made[1]["id"]) == made[1]
    with pytest.raises(ApiError) as err:
        client.create_binding("p", pods[0])
    assert err.value.status == 409
    api.max_limit = 2
    assert client.list_bindings() == made
    assert client.list_bindings({"pod_id": pods[2]}) == [made[2]]
    client.delete_binding(made[0]["id"])
    assert client.list_bindings(limit=1) == [made[1]]


def _instance(region, catalog_urls, region_url=None):
    def get_endpoint(service_type, region_name=None, interface="public"):
        assert service_type == "multiregion"
        if region_url is None:
            from keystoneauth1 import exceptions as ks

            raise ks.EndpointNotFound("none")
        return region_url

    catalog = SimpleNamespace(get_urls=lambda service_type, interface: tuple(catalog_urls))
    return SimpleNamespace(interface="public", region_name=region, get_endpoint_for_service_type=get_endpoint,
                           auth_ref=SimpleNamespace(service_catalog=catalog))


def test_endpoint_of_the_region_first():
    assert plugin.find_endpoint(_instance("CentralRegion", ["http://a"], "http://a")) == "http://a"


def test_endpoint_falls_back_to_the_one_multiregion_endpoint():
    assert plugin.find_endpoint(_instance("RegionOne", ["http://central:19999"])) == "http://central:19999"


def test_endpoint_missing_or_ambiguous():
    with pytest.raises(exceptions.CommandError, match="no 'multiregion'"):
        plugin.find_endpoint(_instance("RegionOne", []))
    with pytest.raises(exceptions.CommandError, match="several 'multiregion' endpoints"):
        plugin.find_endpoint(_instance("RegionOne", ["http://a", "http://b"]))
