"""/v1.0/jobs: schemas, exact resource keys, filters and pages, delete/redo states."""

from __future__ import annotations

import urllib.parse

import pytest

from isthmus.jobs import JobStatus
from tests.unit.admin.conftest import fault


def post_job(client, job_type="shadow_port", project="tenant-a", **resource):
    resource = resource or {"pod_id": "pod-1", "port_id": "port-1"}
    return client.post("/v1.0/jobs", {"job": {"type": job_type, "project_id": project, "resource": resource}})


def set_status(api, job_id: str, status: JobStatus) -> None:
    """Put a job in a state the API cannot reach by itself (a worker would)."""
    import sqlalchemy as sa

    from isthmus.jobs.schema import jobs as table

    with api.store.engine.begin() as conn:
        conn.execute(sa.update(table).where(table.c.id == job_id).values(status=status.value))


def test_schemas_list_every_type_with_its_keys(client):
    assert client.get("/v1.0/jobs/schemas").body == {"schemas": [
        {"type": "network_update", "resource": ["network_id"]},
        {"type": "plain", "resource": ["resource_id"]},
        {"type": "shadow_port", "resource": ["pod_id", "port_id"]},
    ]}


def test_b2_valid_post_is_new_with_named_resource(client, api):
    answer = post_job(client)
    assert answer.status == 200, answer.body
    job = answer.body["job"]
    assert (job["type"], job["status"], job["project_id"]) == ("shadow_port", "NEW", "tenant-a")
    assert job["resource"] == {"pod_id": "pod-1", "port_id": "port-1"}
    assert job["resource_id"] == "pod-1#port-1"
    stored = api.store.get(job["id"])
    assert (stored.job_type, stored.resource_id, stored.project_id) == ("shadow_port", "pod-1#port-1", "tenant-a")
    assert client.get(f"/v1.0/jobs/{job['id']}").body["job"] == job


def test_posting_the_same_key_twice_coalesces_into_one_job(client):
    first = post_job(client).body["job"]
    second = post_job(client).body["job"]
    assert first["id"] == second["id"]
    assert len(client.get("/v1.0/jobs").body["jobs"]) == 1


@pytest.mark.parametrize("resource,message", [
    ({"pod_id": "p"}, "resource: missing key(s) port_id (type shadow_port takes pod_id, port_id)"),
    ({"pod_id": "p", "port_id": "q", "router_id": "r"},
     "resource: unexpected key(s) router_id (type shadow_port takes pod_id, port_id)"),
    ({"port_id": "q", "network_id": "n"},
     "resource: missing key(s) pod_id; unexpected key(s) network_id (type shadow_port takes pod_id, port_id)"),
    ({"pod_id": "p", "port_id": ""}, "resource.port_id: must be a non-empty string"),
    ({"pod_id": "p", "port_id": 3}, "resource.port_id: must be a non-empty string"),
    ({"pod_id": "p#1", "port_id": "q"}, "resource.pod_id: must not contain '#'"),
])
def test_b2_missing_or_extra_keys_are_400_naming_them(client, resource, message):
    assert fault(post_job(client, **resource), 400) == message
    assert client.get("/v1.0/jobs").body == {"jobs": []}


@pytest.mark.parametrize("job,message", [
    ({"project_id": "t", "resource": {}}, "type: is required"),
    ({"type": "nope", "project_id": "t", "resource": {}},
     "type: unknown job type 'nope' (known: network_update, plain, shadow_port)"),
    ({"type": "plain", "resource": {"resource_id": "x"}}, "project_id: is required"),
    ({"type": "plain", "project_id": "", "resource": {"resource_id": "x"}}, "project_id: is required"),
    ({"type": "plain", "project_id": "t"}, "resource: is required (type plain takes resource_id)"),
    ({"type": "plain", "project_id": "t", "resource": "x"}, "resource: must be an object"),
    ({"type": "plain", "project_id": "t", "resource": {"resource_id": "x"}, "extra_id": "0"},
     "job: unknown field(s) extra_id (allowed: type, project_id, resource)"),
])
def test_bad_job_posts_are_400(client, job, message):
    assert fault(client.post("/v1.0/jobs", {"job": job}), 400) == message


@pytest.fixture
def seven(client, api):
    """Seven jobs, newest last: network_update n0..n3 (tenant-a), plain r0..r2 (tenant-b)."""
    ids = []
    for n in range(4):
        ids.append(post_job(client, "network_update", "tenant-a", network_id=f"n{n}").body["job"]["id"])
    for n in range(3):
        ids.append(post_job(client, "plain", "tenant-b", resource_id=f"r{n}").body["job"]["id"])
    set_status(api, ids[0], JobStatus.FAIL)
    set_status(api, ids[4], JobStatus.FAIL)
    set_status(api, ids[1], JobStatus.SUCCESS)
    return ids


def listed(client, query: str = "", path: str = "/v1.0/jobs") -> list[str]:
    answer = client.get(f"{path}?{query}")
    assert answer.status == 200, answer.body
    return [j["id"] for j in answer.body["jobs"]]


def test_list_is_newest_first_with_filters(client, seven):
    assert listed(client) == list(reversed(seven))
    assert listed(client, "type=network_update") == [seven[3], seven[2], seven[1], seven[0]]
    assert listed(client, "project_id=tenant-b") == [seven[6], seven[5], seven[4]]
    assert listed(client, "status=FAIL&project_id=tenant-a") == [seven[0]]
    assert listed(client, "resource_id=r1") == [seven[5]]


def test_b3_status_filter_is_case_insensitive(client, seven):
    assert listed(client, "status=fail") == listed(client, "status=FAIL") == listed(client, "status=Fail") \
        == [seven[4], seven[0]]
    assert listed(client, "status=success") == [seven[1]]


@pytest.mark.parametrize("query,message", [
    ("status=broken", "status: unknown value 'broken'"),
    ("colour=red", "unsupported filter(s): colour (supported: type, status, project_id, resource_id, limit, marker)"),
    ("marker=no-such-job", "marker: unknown job no-such-job"),
    ("limit=-1", "limit: must be a positive integer"),
])
def test_b3_bad_filters_are_400(client, seven, query, message):
    assert fault(client.get(f"/v1.0/jobs?{query}"), 400) == message


def test_pages_carry_jobs_links_until_the_last(client, seven):
    seen: list[str] = []
    path: str | None = "/v1.0/jobs?limit=3&type=network_update"
    pages = 0
    while path:
        body = client.get(path).body
        seen += [j["id"] for j in body["jobs"]]
        pages += 1
        links = body.get("jobs_links")
        if links:
            query = urllib.parse.parse_qs(urllib.parse.urlparse(links[0]["href"]).query)
            assert query["type"] == ["network_update"] and query["marker"] == [seen[-1]]
        path = links[0]["href"].replace("http://localhost", "") if links else None
    assert seen == [seven[3], seven[2], seven[1], seven[0]] and pages == 2


def test_summary_and_detail_views(client, seven):
    summary = client.get("/v1.0/jobs?limit=1").body["jobs"][0]
    assert set(summary) == {"id", "type", "project_id", "status", "timestamp", "resource"}
    assert summary["resource"] == {"resource_id": "r2"}
    detail = client.get("/v1.0/jobs/detail?limit=1").body["jobs"][0]
    assert {"attempt", "failures", "last_error", "run_after", "created_at", "finished_at"} <= set(detail)
    assert "lease_token" not in detail
    assert detail["id"] == summary["id"] and detail["resource"] == summary["resource"]
    assert "jobs/detail?" in client.get("/v1.0/jobs/detail?limit=1").body["jobs_links"][0]["href"]


def test_job_of_an_unloaded_type_shows_its_raw_resource_id(client, api):
    job = api.store.enqueue("router_setup", "pod-1#router-1", project_id="tenant-a")
    assert client.get(f"/v1.0/jobs/{job.id}").body["job"]["resource"] == {"resource_id": "pod-1#router-1"}


def test_b3_delete_running_is_400_others_200(client, api, seven):
    set_status(api, seven[2], JobStatus.RUNNING)
    assert fault(client.delete(f"/v1.0/jobs/{seven[2]}"), 400) == f"cannot delete job {seven[2]} in status RUNNING"
    for job_id in (seven[0], seven[1], seven[3]):  # FAIL, SUCCESS, NEW
        answer = client.delete(f"/v1.0/jobs/{job_id}")
        assert (answer.status, answer.body) == (200, {})
        fault(client.get(f"/v1.0/jobs/{job_id}"), 404)
    assert fault(client.delete(f"/v1.0/jobs/{seven[0]}"), 404) == f"job {seven[0]} not found"


def test_b3_redo(client, api, seven):
    set_status(api, seven[2], JobStatus.RUNNING)
    assert fault(client.put(f"/v1.0/jobs/{seven[1]}"), 400) == f"cannot redo job {seven[1]} in status SUCCESS"
    assert fault(client.put(f"/v1.0/jobs/{seven[2]}"), 400) == f"cannot redo job {seven[2]} in status RUNNING"
    redone = client.put(f"/v1.0/jobs/{seven[0]}")
    assert redone.status == 200
    assert (redone.body["job"]["id"], redone.body["job"]["status"]) == (seven[0], "NEW")
    assert api.store.get(seven[0]).status is JobStatus.NEW
    assert fault(client.put("/v1.0/jobs/unknown"), 404) == "job unknown not found"


def test_relaxed_policy_confines_jobs_to_the_callers_project(client, api, seven):
    """An operator opening jobs to members: they see and queue only their own project's."""
    from oslo_policy import policy

    api.enforcer.set_rules(policy.Rules.from_dict({
        "admin_api:jobs:list": "role:member", "admin_api:jobs:show": "role:member",
        "admin_api:jobs:create": "role:member"}), overwrite=False)
    member = {"roles": "member", "project": "tenant-b"}
    answer = client.get("/v1.0/jobs?project_id=tenant-a", **member)
    assert [j["id"] for j in answer.body["jobs"]] == [seven[6], seven[5], seven[4]]
    fault(client.get(f"/v1.0/jobs/{seven[0]}", **member), 404)
    assert client.get(f"/v1.0/jobs/{seven[4]}", **member).status == 200
    job = {"type": "plain", "project_id": "tenant-a", "resource": {"resource_id": "x"}}
    assert fault(client.post("/v1.0/jobs", {"job": job}, **member), 403) == \
        "project_id: you may only create jobs in your own project (tenant-b)"
