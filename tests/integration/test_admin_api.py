"""The Admin API on a real sandbox: real Keystone tokens through
keystonemiddleware, the endpoint from the catalog, and the real ``openstack
multiregion`` CLI.

Runs on the shared test sandbox, whose isthmus-admin loads the test job types of
``admin_handlers`` through its config directory (tests/sandboxes.py); a test
worker in this process runs them (the sandbox's isthmus-xjob never claims them).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from isthmus.sandbox.layout import CENTRAL_REGION, Layout
from tests.integration import admin_handlers
from tests.integration.admin_handlers import BLOCK, FAIL, TOUCH
from tests.integration.helpers import sandbox_layout
from tests.sandboxes import BIN, load_test_job_types

pytestmark = pytest.mark.integration



@dataclass
class AdminSandbox:
    layout: Layout
    url: str  # the multiregion endpoint, from the catalog
    tokens: dict[str, str]
    projects: dict[str, str]

    def call(self, method: str, path: str, body=None, *, as_: str | None = "admin", token: str | None = None,
             params=None) -> requests.Response:
        headers = {}
        if token:
            headers["X-Auth-Token"] = token
        elif as_ is not None:
            headers["X-Auth-Token"] = self.tokens[as_]
        return requests.request(method, self.url.rstrip("/") + path, json=body, headers=headers, params=params,
                                timeout=30)

    def ok(self, method: str, path: str, body=None, **kw) -> dict:
        resp = self.call(method, path, body, **kw)
        assert resp.status_code == 200, (resp.status_code, resp.text)
        return resp.json()

    def error(self, resp: requests.Response, status: int) -> str:
        assert resp.status_code == status, (resp.status_code, resp.text)
        (inner,) = resp.json().values()
        assert inner["code"] == status
        return inner["message"]

    def wait_status(self, job_id: str, status: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            job = self.ok("GET", f"/v1.0/jobs/{job_id}")["job"]
            if job["status"] == status:
                return job
            assert time.monotonic() < deadline, f"job {job_id} still {job['status']}, wanted {status}"
            time.sleep(0.2)

    def cli(self, *args: str, cloud: str = "isthmus-admin", check: bool = True) -> subprocess.CompletedProcess:
        env = {**os.environ, "OS_CLIENT_CONFIG_FILE": str(self.layout.clouds_yaml)}
        result = subprocess.run([str(BIN / "openstack"), "--os-cloud", cloud, "multiregion", *args],
                                capture_output=True, text=True, env=env, timeout=120)
        if check and result.returncode != 0:
            raise AssertionError(f"openstack multiregion {' '.join(args)}: {result.returncode}\n{result.stderr}")
        return result


def _session(layout, user: str, project: str):
    from keystoneauth1 import session
    from keystoneauth1.identity import v3

    from isthmus.sandbox.layout import PASSWORD

    auth = v3.Password(auth_url=layout.auth_url, username=user, password=PASSWORD, project_name=project,
                       user_domain_name="Default", project_domain_name="Default")
    return session.Session(auth=auth)


@pytest.fixture(scope="module")
def admin(sandbox):
    layout = sandbox_layout(sandbox.state_dir)
    sessions = {"admin": _session(layout, "admin", "admin"), "demo": _session(layout, "demo", "demo")}
    url = sessions["admin"].get_endpoint(service_type="multiregion", interface="public", region_name=CENTRAL_REGION)
    found = AdminSandbox(layout, url, {k: s.get_token() for k, s in sessions.items()},
                         {k: s.get_project_id() for k, s in sessions.items()})
    if TOUCH not in {s["type"] for s in found.ok("GET", "/v1.0/jobs/schemas")["schemas"]}:
        load_test_job_types(sandbox.state_dir)  # a sandbox not started by the tests (ISTHMUS_SANDBOX_DIR)
    return found


@pytest.fixture(scope="module")
def worker(admin):
    """A job worker in this process for the test job types (an isthmus-xjob may run them too)."""
    from isthmus.jobs import (
        HandlerRegistry,
        JobStore,
        Worker,
        WorkerSettings,
        make_engine,
    )

    engine = make_engine(admin.layout.isthmus_db_url)
    handlers = HandlerRegistry()
    admin_handlers.register_handlers(handlers)
    running = Worker(JobStore(engine), handlers, WorkerSettings(concurrency=2, lease_seconds=10, poll_interval=0.1,
                                                                shutdown_grace=1, resync=False))
    thread = threading.Thread(target=running.run, name="test-worker", daemon=True)
    thread.start()
    yield running
    running.request_stop(force=True)
    thread.join(10)
    engine.dispose()


def _pods(admin) -> dict[str, dict]:
    return {p["region_name"]: p for p in admin.ok("GET", "/v1.0/pods")["pods"]}


# -- discovery, authentication, request ids --------------------------------------


def test_catalog_endpoint_and_version_discovery(admin):
    assert admin.url.rstrip("/") == f"http://127.0.0.1:{admin.layout.admin_api_port}"
    versions = admin.call("GET", "/", as_=None)
    assert versions.status_code == 200
    assert versions.json()["versions"][0]["id"] == "v1.0"
    links = {link["rel"] for link in admin.ok("GET", "/v1.0", as_=None)["version"]["links"]}
    assert links == {"self", "pods", "routings", "bindings", "jobs"}
    assert "not allowed" in admin.error(admin.call("POST", "/v1.0", {}), 405)


def test_no_or_bad_token_is_401_with_where_to_authenticate(admin):
    for resp in (admin.call("GET", "/v1.0/pods", as_=None), admin.call("GET", "/v1.0/jobs", token="not-a-token")):
        assert "authentication required" in admin.error(resp, 401)
        assert resp.headers["WWW-Authenticate"] == f'Keystone uri="{admin.layout.auth_url}"'


@pytest.mark.parametrize("method,path", [
    ("GET", "/v1.0/pods"), ("POST", "/v1.0/pods"), ("GET", "/v1.0/pods/x"), ("DELETE", "/v1.0/pods/x"),
    ("GET", "/v1.0/routings"), ("POST", "/v1.0/routings"), ("GET", "/v1.0/routings/1"), ("PUT", "/v1.0/routings/1"),
    ("DELETE", "/v1.0/routings/1"), ("GET", "/v1.0/bindings"), ("POST", "/v1.0/bindings"),
    ("GET", "/v1.0/bindings/1"), ("DELETE", "/v1.0/bindings/1"), ("GET", "/v1.0/jobs"), ("GET", "/v1.0/jobs/detail"),
    ("GET", "/v1.0/jobs/schemas"), ("POST", "/v1.0/jobs"), ("GET", "/v1.0/jobs/x"), ("PUT", "/v1.0/jobs/x"),
    ("DELETE", "/v1.0/jobs/x"), ("GET", "/v1.0/unknown"),
])
def test_b1_demo_user_gets_403_everywhere(admin, method, path):
    """Not Tricircle's 401 for pods: a member of a project is forbidden, whatever it asks."""
    message = admin.error(admin.call(method, path, {"pod": {"region_name": "X"}}, as_="demo"), 403)
    assert message.startswith("policy does not allow admin_api")


def test_answers_carry_request_ids_that_the_log_names(admin):
    resp = admin.call("GET", "/v1.0/pods")
    request_id = resp.headers["x-openstack-request-id"]
    assert request_id.startswith("req-")
    log = Path(admin.layout.logs) / "isthmus-admin.log"
    deadline = time.monotonic() + 10
    while request_id not in log.read_text():
        assert time.monotonic() < deadline, "request id not logged"
        time.sleep(0.2)
    line = next(ln for ln in log.read_text().splitlines() if request_id in ln and "GET /v1.0/pods" in ln)
    assert "-> 200" in line and f"project={admin.projects['admin']}" in line


# -- pods -----------------------------------------------------------------------


def test_b1_sandbox_pods_and_conflicts(admin):
    pods = _pods(admin)
    assert {r: p["az_name"] for r, p in pods.items()} == {"CentralRegion": "", "RegionOne": "az1", "RegionTwo": "az2"}
    assert "central pod exists" in admin.error(admin.call("POST", "/v1.0/pods", {"pod": {"region_name": "Top2"}}), 409)
    assert admin.error(admin.call("POST", "/v1.0/pods", {"pod": {"region_name": "", "az_name": "az1"}}), 400) == \
        "region_name: is required"
    assert "region_name" in admin.error(
        admin.call("POST", "/v1.0/pods", {"pod": {"region_name": "CentralRegion", "az_name": "az9"}}), 409)
    assert "region_name" in admin.error(
        admin.call("POST", "/v1.0/pods", {"pod": {"region_name": "RegionOne", "az_name": "az1"}}), 409)
    assert _pods(admin) == pods


def test_b1_create_show_delete_a_pod(admin):
    pod = admin.ok("POST", "/v1.0/pods", {"pod": {"region_name": "RegionNine", "az_name": "az9",
                                                   "dc_name": "dc9"}})["pod"]
    assert (pod["region_name"], pod["az_name"], pod["dc_name"], pod["pod_az_name"]) == ("RegionNine", "az9", "dc9", "")
    assert admin.ok("GET", f"/v1.0/pods/{pod['pod_id']}") == {"pod": pod}
    assert admin.ok("DELETE", f"/v1.0/pods/{pod['pod_id']}") == {}
    assert admin.error(admin.call("GET", f"/v1.0/pods/{pod['pod_id']}"), 404) == f"pod {pod['pod_id']} not found"
    assert "RegionNine" not in _pods(admin)


# -- routings -------------------------------------------------------------------


def test_b4_routings_pages_filters_and_project(admin):
    pods = _pods(admin)
    tag = uuid.uuid4().hex[:8]
    made = []
    for n, project in enumerate(("tenant-a", "tenant-b", "tenant-a")):
        made.append(admin.ok("POST", "/v1.0/routings", {"routing": {
            "top_id": f"{tag}-{n}", "bottom_id": f"{tag}-b{n}", "pod_id": pods["RegionOne"]["pod_id"],
            "project_id": project, "resource_type": "network"}})["routing"])
    ids = [r["id"] for r in made]
    assert ids == sorted(ids)
    page = admin.ok("GET", "/v1.0/routings", params={"limit": 2})
    assert [r["id"] for r in page["routings"]] == [ids[2], ids[1]]
    href = page["routings_links"][0]["href"]
    assert urllib.parse.parse_qs(urllib.parse.urlparse(href).query)["marker"] == [str(ids[1])]
    after = requests.get(href, headers={"X-Auth-Token": admin.tokens["admin"]}, timeout=30).json()
    assert after["routings"][0]["id"] == ids[0]
    assert admin.error(admin.call("GET", "/v1.0/routings", params={"marker": "x"}), 400).startswith("marker:")
    assert admin.error(admin.call("GET", "/v1.0/routings", params={"marker": 10**9}), 400) == \
        f"marker: no routing {10**9}"
    assert admin.error(admin.call("GET", "/v1.0/routings", params={"colour": "red"}), 400).startswith(
        "unsupported filter(s): colour")
    # Admins filter by any project (documented difference from Tricircle's "always the caller's").
    tenant_a = admin.ok("GET", "/v1.0/routings", params={"project_id": "tenant-a", "resource_type": "network"})
    assert {r["id"] for r in tenant_a["routings"]} >= {ids[0], ids[2]}
    assert all(r["project_id"] == "tenant-a" for r in tenant_a["routings"])
    updated = admin.ok("PUT", f"/v1.0/routings/{ids[1]}", {"routing": {"pod_id": pods["RegionTwo"]["pod_id"]}})
    assert updated["routing"]["pod_id"] == pods["RegionTwo"]["pod_id"]
    assert admin.error(admin.call("PUT", f"/v1.0/routings/{ids[1]}", {"routing": {"pod_id": "gone"}}), 400) == \
        "pod_id: no pod gone"
    for routing_id in ids:
        assert admin.ok("DELETE", f"/v1.0/routings/{routing_id}") == {}
    assert admin.error(admin.call("GET", f"/v1.0/routings/{ids[0]}"), 404) == f"routing {ids[0]} not found"


# -- bindings (400 where Trio2o said 422) --------------------


def test_bindings_validation_conflict_and_cli(admin):
    pods = _pods(admin)
    project = f"tenant-{uuid.uuid4().hex[:8]}"

    def post(pod_id: str) -> requests.Response:
        return admin.call("POST", "/v1.0/bindings", {"binding": {"project_id": project, "pod_id": pod_id}})

    assert admin.error(post(pods["CentralRegion"]["pod_id"]), 400) == \
        "pod_id: the central pod cannot be bound to a project"
    assert admin.error(post("no-such-pod"), 400) == "pod_id: no pod no-such-pod"
    resp = post(pods["RegionOne"]["pod_id"])
    assert resp.status_code == 200, resp.text
    binding = resp.json()["binding"]
    assert admin.error(post(pods["RegionOne"]["pod_id"]), 409) == \
        f"binding: project {project} is already bound to pod {pods['RegionOne']['pod_id']}"
    assert admin.ok("GET", f"/v1.0/bindings/{binding['id']}") == {"binding": binding}

    # The CLI names the pod by region name; lists are oldest first (the gateway's order).
    made = json.loads(admin.cli("binding", "create", "--project", project, "--pod", "RegionTwo",
                                "-f", "json").stdout)
    assert (made["project_id"], made["pod_id"]) == (project, pods["RegionTwo"]["pod_id"])
    listed = json.loads(admin.cli("binding", "list", "--project", project, "-f", "json").stdout)
    assert [(b["ID"], b["Pod ID"]) for b in listed] == [
        (binding["id"], pods["RegionOne"]["pod_id"]), (made["id"], pods["RegionTwo"]["pod_id"])]
    admin.cli("binding", "delete", str(made["id"]))
    assert admin.ok("GET", "/v1.0/bindings", params={"project_id": project}) == {"bindings": [binding]}
    assert admin.ok("DELETE", f"/v1.0/bindings/{binding['id']}") == {}
    assert admin.error(admin.call("DELETE", f"/v1.0/bindings/{binding['id']}"), 404) == \
        f"binding {binding['id']} not found"


# -- jobs --------------------------------------------------------------------


def _post_job(admin, job_type: str, resource: dict, project: str = "tenant-a"):
    return admin.call("POST", "/v1.0/jobs", {"job": {"type": job_type, "project_id": project, "resource": resource}})


def test_b2_schemas_list_every_loaded_type_with_exact_keys(admin):
    schemas = admin.ok("GET", "/v1.0/jobs/schemas")["schemas"]
    by_type = {s["type"]: s["resource"] for s in schemas}
    assert by_type[TOUCH] == ["pod_id", "network_id"]
    assert by_type[FAIL] == ["resource_id"] and by_type[BLOCK] == ["resource_id"]
    assert [s["type"] for s in schemas] == sorted(by_type)


def test_b2_post_validates_keys_then_runs_to_success(admin, worker):
    assert admin.error(_post_job(admin, TOUCH, {"pod_id": "p"}), 400) == \
        f"resource: missing key(s) network_id (type {TOUCH} takes pod_id, network_id)"
    assert admin.error(_post_job(admin, TOUCH, {"pod_id": "p", "network_id": "n", "port_id": "x"}), 400) == \
        f"resource: unexpected key(s) port_id (type {TOUCH} takes pod_id, network_id)"
    assert admin.error(_post_job(admin, "no_such_type", {}), 400).startswith("type: unknown job type 'no_such_type'")
    network = str(uuid.uuid4())
    resp = _post_job(admin, TOUCH, {"pod_id": "RegionOne", "network_id": network})
    assert resp.status_code == 200, resp.text
    job = resp.json()["job"]
    assert job["status"] in ("NEW", "RUNNING", "SUCCESS")  # a worker may already have it
    assert job["resource"] == {"pod_id": "RegionOne", "network_id": network}
    assert job["resource_id"] == f"RegionOne#{network}"
    done = admin.wait_status(job["id"], "SUCCESS")
    assert done["finished_at"] and done["resource"] == job["resource"]
    listed = admin.ok("GET", "/v1.0/jobs", params={"type": TOUCH, "resource_id": f"RegionOne#{network}"})["jobs"]
    assert [(j["id"], j["status"]) for j in listed] == [(job["id"], "SUCCESS")]  # stable id after success


def test_b3_delete_and_redo_by_state(admin, worker, tmp_path):
    release = tmp_path / "release"
    blocked = _post_job(admin, BLOCK, {"resource_id": str(release)}).json()["job"]
    admin.wait_status(blocked["id"], "RUNNING")
    assert admin.error(admin.call("DELETE", f"/v1.0/jobs/{blocked['id']}"), 400) == \
        f"cannot delete job {blocked['id']} in status RUNNING"
    assert admin.error(admin.call("PUT", f"/v1.0/jobs/{blocked['id']}"), 400) == \
        f"cannot redo job {blocked['id']} in status RUNNING"
    release.touch()
    admin.wait_status(blocked["id"], "SUCCESS")
    assert admin.error(admin.call("PUT", f"/v1.0/jobs/{blocked['id']}"), 400) == \
        f"cannot redo job {blocked['id']} in status SUCCESS"

    failing = _post_job(admin, FAIL, {"resource_id": f"fail-{uuid.uuid4().hex[:8]}"}).json()["job"]
    failed = admin.wait_status(failing["id"], "FAIL")
    assert "test failure" in failed["last_error"]
    fail_lower = admin.ok("GET", "/v1.0/jobs", params={"status": "fail"})["jobs"]
    fail_upper = admin.ok("GET", "/v1.0/jobs", params={"status": "FAIL"})["jobs"]
    assert fail_lower == fail_upper and failing["id"] in {j["id"] for j in fail_lower}
    assert admin.error(admin.call("GET", "/v1.0/jobs", params={"colour": "red"}), 400).startswith(
        "unsupported filter(s): colour")
    redone = admin.ok("PUT", f"/v1.0/jobs/{failing['id']}")["job"]
    assert (redone["id"], redone["status"]) == (failing["id"], "NEW")
    admin.wait_status(failing["id"], "FAIL")  # the redo really ran again
    assert admin.ok("DELETE", f"/v1.0/jobs/{failing['id']}") == {}
    assert admin.error(admin.call("GET", f"/v1.0/jobs/{failing['id']}"), 404) == f"job {failing['id']} not found"


def test_jobs_pages_carry_links(admin, worker):
    for n in range(3):
        assert _post_job(admin, FAIL, {"resource_id": f"page-{uuid.uuid4().hex[:8]}-{n}"}).status_code == 200
    first = admin.ok("GET", "/v1.0/jobs", params={"type": FAIL, "limit": 2})
    assert len(first["jobs"]) == 2
    href = first["jobs_links"][0]["href"]
    query = urllib.parse.parse_qs(urllib.parse.urlparse(href).query)
    assert query["marker"] == [first["jobs"][-1]["id"]] and query["type"] == [FAIL]
    rest = requests.get(href, headers={"X-Auth-Token": admin.tokens["admin"]}, timeout=30).json()["jobs"]
    assert rest and not {j["id"] for j in rest} & {j["id"] for j in first["jobs"]}


# -- the openstack CLI -------------------------------------------------------------


def test_cli_pods_routings_jobs(admin, worker):
    """``openstack multiregion`` with clouds.yaml's default region (RegionOne): the plugin
    finds the one multiregion endpoint (CentralRegion) in the catalog."""
    pods = {p["Region Name"]: p for p in json.loads(admin.cli("pod", "list", "-f", "json").stdout)}
    assert {r: p["AZ Name"] for r, p in pods.items()} == {"CentralRegion": "", "RegionOne": "az1", "RegionTwo": "az2"}
    shown = json.loads(admin.cli("pod", "show", "RegionTwo", "-f", "json").stdout)
    assert shown["pod_id"] == pods["RegionTwo"]["Pod ID"]

    tag = uuid.uuid4().hex[:8]
    routing = json.loads(admin.cli("routing", "create", "--top-id", tag, "--bottom-id", f"{tag}-b",
                                   "--pod-id", "RegionTwo", "--project-id", "tenant-cli",
                                   "--resource-type", "port", "-f", "json").stdout)
    assert (routing["pod_id"], routing["resource_type"]) == (pods["RegionTwo"]["Pod ID"], "port")
    listed = json.loads(admin.cli("routing", "list", "--project-id", "tenant-cli", "-f", "json").stdout)
    assert [r["ID"] for r in listed] == [routing["id"]]
    admin.cli("routing", "delete", str(routing["id"]))
    assert json.loads(admin.cli("routing", "list", "--project-id", "tenant-cli", "-f", "json").stdout) == []

    network = str(uuid.uuid4())
    job = json.loads(admin.cli("job", "create", "--type", TOUCH, "--project-id", "tenant-cli",
                               "--resource", "pod_id=RegionOne", "--resource", f"network_id={network}",
                               "-f", "json").stdout)
    assert job["resource_id"] == f"RegionOne#{network}"
    admin.wait_status(job["id"], "SUCCESS")

    bad = admin.cli("job", "create", "--type", TOUCH, "--project-id", "t", "--resource", "pod_id=R", check=False)
    assert bad.returncode == 1
    assert "resource: missing key(s) network_id" in bad.stderr and "HTTP 400" in bad.stderr

    denied = admin.cli("pod", "list", cloud="isthmus-demo", check=False)
    assert denied.returncode == 1
    assert "policy does not allow admin_api:pods:list" in denied.stderr and "HTTP 403" in denied.stderr
