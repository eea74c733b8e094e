"""/v1.0/routings: validation, filters, id-descending pages with next links, scope."""

from __future__ import annotations

import urllib.parse

import pytest

from tests.unit.admin.conftest import ADMIN_PROJECT, DEMO_PROJECT, fault


def routing(pod_id: str, n: int, project: str = "tenant-a", rtype: str = "network") -> dict:
    return {"top_id": f"top-{n}", "bottom_id": f"bottom-{n}", "pod_id": pod_id, "project_id": project,
            "resource_type": rtype}


@pytest.fixture
def five(client, pods):
    """Five routings: ids 1..5; 1-3 in tenant-a (network), 4-5 in tenant-b (port)."""
    pod = pods["RegionOne"]["pod_id"]
    made = []
    for n in range(1, 6):
        body = routing(pod, n, "tenant-a" if n <= 3 else "tenant-b", "network" if n <= 3 else "port")
        answer = client.post("/v1.0/routings", {"routing": body})
        assert answer.status == 200, answer.body
        made.append(answer.body["routing"])
    return made


def test_create_and_show(client, pods):
    pod = pods["RegionTwo"]["pod_id"]
    created = client.post("/v1.0/routings", {"routing": routing(pod, 1)}).body["routing"]
    assert {k: created[k] for k in ("top_id", "bottom_id", "pod_id", "project_id", "resource_type")} == routing(pod, 1)
    assert isinstance(created["id"], int) and created["created_at"] == created["updated_at"]
    assert client.get(f"/v1.0/routings/{created['id']}").body == {"routing": created}


def test_duplicate_is_409(client, five):
    again = {k: five[0][k] for k in ("top_id", "bottom_id", "pod_id", "project_id", "resource_type")}
    assert "exists" in fault(client.post("/v1.0/routings", {"routing": again}), 409)


@pytest.mark.parametrize("change,message", [
    ({"top_id": ""}, "top_id: is required"),
    ({"bottom_id": ""}, "bottom_id: is required"),
    ({"bottom_id": None}, "bottom_id: is required"),
    ({"project_id": " "}, "project_id: is required"),
    ({"resource_type": "spaceship"}, "resource_type: must be one of network, subnet"),
    ({"pod_id": "no-such-pod"}, "pod_id: no pod no-such-pod"),
    ({"top_id": 5}, "top_id: must be a string"),
    ({"colour": "x"}, "routing: unknown field(s) colour"),
])
def test_bad_routing_is_400_naming_the_field(client, pods, change, message):
    body = {**routing(pods["RegionOne"]["pod_id"], 1), **change}
    assert fault(client.post("/v1.0/routings", {"routing": body}), 400).startswith(message)


def test_missing_fields_are_named(client, pods):
    message = fault(client.post("/v1.0/routings", {"routing": {"top_id": "t"}}), 400)
    assert message == "routing: missing field(s) bottom_id, pod_id, project_id, resource_type"


def test_b4_pages_are_id_descending_with_next_links(client, five):
    first = client.get("/v1.0/routings?limit=2").body
    assert [r["id"] for r in first["routings"]] == [5, 4]
    (link,) = first["routings_links"]
    assert link["rel"] == "next"
    parsed = urllib.parse.urlparse(link["href"])
    assert parsed.path == "/v1.0/routings"
    assert urllib.parse.parse_qs(parsed.query) == {"limit": ["2"], "marker": ["4"]}
    second = client.get(link["href"].replace("http://localhost", "")).body
    assert [r["id"] for r in second["routings"]] == [3, 2]
    third = client.get("/v1.0/routings?limit=2&marker=2").body
    assert [r["id"] for r in third["routings"]] == [1]
    assert "routings_links" not in third


def test_exact_last_page_has_no_next_link(client, five):
    body = client.get("/v1.0/routings?limit=5").body
    assert [r["id"] for r in body["routings"]] == [5, 4, 3, 2, 1] and "routings_links" not in body


def test_next_link_keeps_filters(client, five):
    body = client.get("/v1.0/routings?resource_type=network&limit=1").body
    assert [r["id"] for r in body["routings"]] == [3]
    query = urllib.parse.parse_qs(urllib.parse.urlparse(body["routings_links"][0]["href"]).query)
    assert query == {"resource_type": ["network"], "limit": ["1"], "marker": ["3"]}


def test_filters(client, five):
    def ids(query: str) -> list[int]:
        answer = client.get(f"/v1.0/routings?{query}")
        assert answer.status == 200, answer.body
        return [r["id"] for r in answer.body["routings"]]

    assert ids("project_id=tenant-b") == [5, 4]
    assert ids("resource_type=network") == [3, 2, 1]
    assert ids("top_id=top-2") == [2]
    assert ids("bottom_id=bottom-5&resource_type=port") == [5]
    assert ids("id=3") == [3]
    assert ids("") == [5, 4, 3, 2, 1]


@pytest.mark.parametrize("query,message", [
    ("marker=abc", "marker: must be an integer, got 'abc'"),
    ("marker=99", "marker: no routing 99"),
    ("limit=0", "limit: must be a positive integer"),
    ("limit=x", "limit: must be an integer, got 'x'"),
    ("id=x", "id: must be an integer, got 'x'"),
    ("colour=red", "unsupported filter(s): colour (supported: id, top_id"),
    ("created_at=2020", "unsupported filter(s): created_at"),
    ("limit=1&limit=2", "limit: given more than once"),
])
def test_b4_bad_queries_are_400(client, five, query, message):
    assert fault(client.get(f"/v1.0/routings?{query}"), 400).startswith(message)


def test_limit_is_capped_to_pagination_max_limit(client, five, api):
    api.max_limit = 3
    body = client.get("/v1.0/routings?limit=100").body
    assert [r["id"] for r in body["routings"]] == [5, 4, 3]
    assert "limit=3" in body["routings_links"][0]["href"]
    assert len(client.get("/v1.0/routings").body["routings"]) == 3


def test_update(client, five, pods):
    answer = client.put("/v1.0/routings/2", {"routing": {"bottom_id": "new-bottom",
                                                         "pod_id": pods["RegionTwo"]["pod_id"]}})
    assert answer.status == 200, answer.body
    updated = answer.body["routing"]
    assert (updated["bottom_id"], updated["pod_id"], updated["top_id"]) == (
        "new-bottom", pods["RegionTwo"]["pod_id"], "top-2")
    assert client.get("/v1.0/routings/2").body["routing"] == updated


@pytest.mark.parametrize("change,status,message", [
    ({}, 400, "routing: give at least one of top_id"),
    ({"pod_id": "gone"}, 400, "pod_id: no pod gone"),
    ({"resource_type": "spaceship"}, 400, "resource_type: must be one of"),
    ({"bottom_id": ""}, 400, "bottom_id: is required"),
    ({"top_id": None}, 400, "top_id: must be a non-empty string"),
    ({"id": 7}, 400, "routing: unknown field(s) id"),
    ({"top_id": "top-1"}, 409, "routing: another routing maps top-1"),
])
def test_bad_updates(client, five, change, status, message):
    assert fault(client.put("/v1.0/routings/2", {"routing": change}), status).startswith(message)
    assert client.get("/v1.0/routings/2").body["routing"] == five[1]


def test_unknown_routing_is_404(client, five):
    for method in ("GET", "PUT", "DELETE"):
        assert fault(client.call(method, "/v1.0/routings/99", {"routing": {"top_id": "x"}}), 404) == \
            "routing 99 not found"
    assert fault(client.get("/v1.0/routings/abc"), 404) == "routing abc not found"


def test_delete(client, five):
    assert (client.delete("/v1.0/routings/3").status, client.delete("/v1.0/routings/3").status) == (200, 404)
    assert [r["id"] for r in client.get("/v1.0/routings").body["routings"]] == [5, 4, 2, 1]


def test_admin_sees_every_project_and_filters_by_any(client, five):
    assert len(client.get("/v1.0/routings", project=ADMIN_PROJECT).body["routings"]) == 5
    assert [r["id"] for r in client.get("/v1.0/routings?project_id=tenant-a").body["routings"]] == [3, 2, 1]


def test_relaxed_policy_confines_callers_to_their_project(client, five, api):
    """An operator opening the list to readers: they only ever see their own project."""
    from oslo_policy import policy

    api.enforcer.set_rules(policy.Rules.from_dict({"admin_api:routings:list": "role:reader",
                                                   "admin_api:routings:show": "role:reader"}), overwrite=False)
    seen = client.get("/v1.0/routings?project_id=tenant-a", roles="reader", project="tenant-b").body
    assert [r["id"] for r in seen["routings"]] == [5, 4]
    assert fault(client.get("/v1.0/routings/1", roles="reader", project="tenant-b"), 404) == "routing 1 not found"
    assert client.get("/v1.0/routings/4", roles="reader", project="tenant-b").status == 200
    assert client.get("/v1.0/routings", roles="reader", project=DEMO_PROJECT).body == {"routings": []}
