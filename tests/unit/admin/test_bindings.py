"""/v1.0/bindings: project -> regional pod bindings the gateway places new servers by
(with 400 for Trio2o's 422)."""

from __future__ import annotations

import urllib.parse

import pytest

from isthmus.registry.bindings import Bindings
from tests.unit.admin.conftest import DEMO_PROJECT, fault


def bind(client, project: str, pod_id: str):
    return client.post("/v1.0/bindings", {"binding": {"project_id": project, "pod_id": pod_id}})


@pytest.fixture
def four(client, pods):
    """ids 1..4: tenant-a -> RegionOne, RegionTwo; tenant-b -> RegionOne, RegionTwo."""
    made = []
    for project in ("tenant-a", "tenant-b"):
        for region in ("RegionOne", "RegionTwo"):
            answer = bind(client, project, pods[region]["pod_id"])
            assert answer.status == 200, answer.body
            made.append(answer.body["binding"])
    return made


def test_create_show_list(client, pods):
    pod = pods["RegionOne"]["pod_id"]
    created = bind(client, "tenant-a", pod).body["binding"]
    assert {k: created[k] for k in ("project_id", "pod_id")} == {"project_id": "tenant-a", "pod_id": pod}
    assert isinstance(created["id"], int) and created["created_at"]
    assert client.get(f"/v1.0/bindings/{created['id']}").body == {"binding": created}
    assert client.get("/v1.0/bindings").body == {"bindings": [created]}


def test_central_and_unknown_pods_are_400_naming_pod_id(client, pods):
    assert fault(bind(client, "tenant-a", pods["CentralRegion"]["pod_id"]), 400) == \
        "pod_id: the central pod cannot be bound to a project"
    assert fault(bind(client, "tenant-a", "no-such-pod"), 400) == "pod_id: no pod no-such-pod"
    assert client.get("/v1.0/bindings").body == {"bindings": []}


@pytest.mark.parametrize("binding,message", [
    ({"pod_id": "P"}, "project_id: is required"),
    ({"project_id": " ", "pod_id": "P"}, "project_id: is required"),
    ({"project_id": "t"}, "pod_id: is required"),
    ({"project_id": "t", "pod_id": 7}, "pod_id: must be a string"),
    ({"project_id": ["t"], "pod_id": "P"}, "project_id: must be a string"),
    ({"project_id": "t", "pod_id": "P", "is_binding": True}, "binding: unknown field(s) is_binding"),
])
def test_bad_bindings_are_400_naming_the_field(client, pods, binding, message):
    assert fault(client.post("/v1.0/bindings", {"binding": binding}), 400).startswith(message)


def test_malformed_body_is_400(client):
    assert fault(client.post("/v1.0/bindings", {"pod_binding": {}}), 400) == \
        'body: expected a JSON object {"binding": {...}}'


def test_duplicate_is_409(client, four):
    answer = bind(client, "tenant-a", four[0]["pod_id"])
    assert answer.body == {"conflictingRequest": {
        "message": f"binding: project tenant-a is already bound to pod {four[0]['pod_id']}", "code": 409}}
    assert len(client.get("/v1.0/bindings").body["bindings"]) == 4


def test_gateway_bind_stays_idempotent_next_to_the_api(client, engine, pods):
    bindings = Bindings(engine)
    pod = pods["RegionTwo"]["pod_id"]
    first = bindings.bind("tenant-g", pod)
    assert bindings.bind("tenant-g", pod) == first  # the gateway's placement: no error
    fault(bind(client, "tenant-g", pod), 409)
    assert [b.pod_id for b in bindings.list("tenant-g")] == [pod]


def test_filters_and_oldest_first_pages(client, four, pods):
    def ids(query: str) -> list[int]:
        answer = client.get(f"/v1.0/bindings?{query}")
        assert answer.status == 200, answer.body
        return [b["id"] for b in answer.body["bindings"]]

    assert ids("") == [1, 2, 3, 4]
    assert ids("project_id=tenant-b") == [3, 4]
    assert ids(f"pod_id={pods['RegionTwo']['pod_id']}") == [2, 4]
    assert ids(f"project_id=tenant-a&pod_id={pods['RegionTwo']['pod_id']}") == [2]
    first = client.get("/v1.0/bindings?limit=3").body
    assert [b["id"] for b in first["bindings"]] == [1, 2, 3]
    (link,) = first["bindings_links"]
    parsed = urllib.parse.urlparse(link["href"])
    assert parsed.path == "/v1.0/bindings"
    assert urllib.parse.parse_qs(parsed.query) == {"limit": ["3"], "marker": ["3"]}
    second = client.get(link["href"].replace("http://localhost", "")).body
    assert second == {"bindings": [four[3]]}
    assert "bindings_links" not in client.get("/v1.0/bindings?limit=4").body


@pytest.mark.parametrize("query,message", [
    ("marker=abc", "marker: must be an integer, got 'abc'"),
    ("marker=99", "marker: no binding 99"),
    ("limit=0", "limit: must be a positive integer"),
    ("tenant_id=x", "unsupported filter(s): tenant_id (supported: project_id, pod_id, limit, marker)"),
])
def test_bad_queries_are_400(client, four, query, message):
    assert fault(client.get(f"/v1.0/bindings?{query}"), 400) == message


def test_delete_then_unknown_is_404(client, four):
    assert (client.delete("/v1.0/bindings/2").status, client.delete("/v1.0/bindings/2").status) == (200, 404)
    assert [b["id"] for b in client.get("/v1.0/bindings").body["bindings"]] == [1, 3, 4]
    assert fault(client.get("/v1.0/bindings/2"), 404) == "binding 2 not found"
    assert fault(client.get("/v1.0/bindings/abc"), 404) == "binding abc not found"
    assert fault(client.delete("/v1.0/bindings/abc"), 404) == "binding abc not found"


def test_deleting_a_pod_drops_its_bindings(client, four, pods):
    assert client.delete(f"/v1.0/pods/{pods['RegionOne']['pod_id']}").status == 200
    assert [b["id"] for b in client.get("/v1.0/bindings").body["bindings"]] == [2, 4]


@pytest.mark.parametrize("method,path", [
    ("GET", "/v1.0/bindings"), ("POST", "/v1.0/bindings"), ("GET", "/v1.0/bindings/1"),
    ("DELETE", "/v1.0/bindings/1"), ("PUT", "/v1.0/bindings/1"),
])
def test_non_admin_is_403(client, four, method, path):
    answer = client.call(method, path, {"binding": {"project_id": DEMO_PROJECT, "pod_id": four[0]["pod_id"]}},
                         roles="member", project=DEMO_PROJECT)
    assert fault(answer, 403).startswith("policy does not allow admin_api")
    assert len(client.get("/v1.0/bindings").body["bindings"]) == 4


def test_unauthenticated_is_401(client):
    assert "authentication required" in fault(client.get("/v1.0/bindings", identity=None), 401)


def test_relaxed_policy_confines_callers_to_their_project(client, four, api, pods):
    from oslo_policy import policy

    api.enforcer.set_rules(policy.Rules.from_dict({f"admin_api:bindings:{op}": "role:reader"
                                                   for op in ("list", "show", "create")}), overwrite=False)
    seen = client.get("/v1.0/bindings?project_id=tenant-a", roles="reader", project="tenant-b").body
    assert [b["id"] for b in seen["bindings"]] == [3, 4]
    assert fault(client.get("/v1.0/bindings/1", roles="reader", project="tenant-b"), 404) == "binding 1 not found"
    assert fault(client.post("/v1.0/bindings", {"binding": {"project_id": "tenant-a", "pod_id": four[0]["pod_id"]}},
                             roles="reader", project="tenant-b"), 403).startswith("project_id: you may only bind")
