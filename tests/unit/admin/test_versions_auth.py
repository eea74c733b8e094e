"""Version discovery, authentication (401), policy (403 everywhere), routing errors."""

from __future__ import annotations

import pytest

from tests.unit.admin.conftest import DEMO_PROJECT, fault

PROTECTED = [
    ("GET", "/v1.0/pods"), ("POST", "/v1.0/pods"), ("GET", "/v1.0/pods/x"), ("DELETE", "/v1.0/pods/x"),
    ("GET", "/v1.0/routings"), ("POST", "/v1.0/routings"), ("GET", "/v1.0/routings/1"),
    ("PUT", "/v1.0/routings/1"), ("DELETE", "/v1.0/routings/1"),
    ("GET", "/v1.0/bindings"), ("POST", "/v1.0/bindings"), ("GET", "/v1.0/bindings/1"), ("DELETE", "/v1.0/bindings/1"),
    ("GET", "/v1.0/jobs"), ("GET", "/v1.0/jobs/detail"), ("GET", "/v1.0/jobs/schemas"), ("POST", "/v1.0/jobs"),
    ("GET", "/v1.0/jobs/x"), ("PUT", "/v1.0/jobs/x"), ("DELETE", "/v1.0/jobs/x"),
    # unknown paths and methods too: a non-admin learns nothing
    ("GET", "/v1.0/nothing"), ("PATCH", "/v1.0/pods"), ("POST", "/v1.0/jobs/schemas"),
]


def test_versions_document_needs_no_token(client):
    answer = client.get("/", identity=None)
    assert answer.status == 200
    (version,) = answer.body["versions"]
    assert version["id"] == "v1.0" and version["status"] == "CURRENT"
    assert version["links"] == [{"rel": "self", "href": "http://localhost/v1.0/"}]


def test_v1_links_to_the_four_collections(client):
    answer = client.get("/v1.0/", identity=None)
    assert answer.status == 200
    links = {link["rel"]: link["href"] for link in answer.body["version"]["links"]}
    assert links == {"self": "http://localhost/v1.0/", "pods": "http://localhost/v1.0/pods",
                     "routings": "http://localhost/v1.0/routings", "bindings": "http://localhost/v1.0/bindings",
                     "jobs": "http://localhost/v1.0/jobs"}


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
@pytest.mark.parametrize("path", ["/", "/v1.0"])
def test_other_methods_on_version_documents_are_405(client, method, path):
    answer = client.call(method, path, identity=None)
    assert "not allowed" in fault(answer, 405)
    assert answer.headers["Allow"] == "GET"
    assert answer.body == {"badMethod": {"message": f"method {method} not allowed on {path} (allowed: GET)",
                                         "code": 405}}


@pytest.mark.parametrize("method,path", PROTECTED)
def test_without_a_valid_token_everything_else_is_401(client, method, path):
    assert "authentication required" in fault(client.call(method, path, identity="Invalid"), 401)
    assert "authentication required" in fault(client.call(method, path, identity=None), 401)


@pytest.mark.parametrize("method,path", PROTECTED)
@pytest.mark.parametrize("roles", ["member", "reader", "member,reader", ""])
def test_non_admin_gets_403_everywhere(client, pods, method, path, roles):
    message = fault(client.call(method, path, {"x": {}}, roles=roles, project=DEMO_PROJECT), 403)
    assert "policy does not allow admin_api" in message


def test_non_admin_changes_nothing(client, pods):
    before = client.get("/v1.0/pods").body
    fault(client.delete(f"/v1.0/pods/{pods['RegionOne']['pod_id']}", roles="member"), 403)
    fault(client.post("/v1.0/pods", {"pod": {"region_name": "RegionNine", "az_name": "az9"}}, roles="member"), 403)
    assert client.get("/v1.0/pods").body == before


def test_unknown_path_and_method_for_admin(client):
    assert fault(client.get("/v1.0/nothing"), 404) == "no resource at /v1.0/nothing"
    answer = client.call("PATCH", "/v1.0/routings/1")
    assert fault(answer, 405) == "method PATCH not allowed on /v1.0/routings/1 (allowed: DELETE, GET, PUT)"
    assert answer.headers["Allow"] == "DELETE, GET, PUT"


def test_policy_file_overrides_a_default(tmp_path, engine):
    from isthmus import jobs, registry
    from isthmus.admin import wsgi
    from isthmus.admin.app import AdminApi
    from isthmus.admin.policy import make_enforcer
    from tests.unit.admin.conftest import Client, handler_registry

    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text('"admin_api:pods:list": "role:reader"\n')
    conf_file = tmp_path / "isthmus.conf"
    conf_file.write_text(f"[oslo_policy]\npolicy_file = {policy_file}\n")
    conf = wsgi.make_conf([], [str(conf_file)])
    api = AdminApi(registry.Registry(engine), jobs.JobStore(engine), handler_registry(), make_enforcer(conf))
    client = Client(api)
    assert client.get("/v1.0/pods", roles="reader").body == {"pods": []}
    fault(client.get("/v1.0/pods", roles="member"), 403)
    fault(client.get("/v1.0/routings", roles="reader"), 403)  # other rules keep their default


def test_internal_errors_are_json_500_without_details(client, api, monkeypatch):
    def broken():
        raise RuntimeError("secret database detail")

    monkeypatch.setattr(api.registry, "pods", broken)
    message = fault(client.get("/v1.0/pods"), 500)
    assert "internal error" in message and "secret" not in message


def test_every_policy_rule_is_documented():
    from isthmus.admin.app import AdminApi
    from isthmus.admin.policy import RULES

    names = {r.name for r in RULES}
    used = {op.rule for route in AdminApi._routes(AdminApi.__new__(AdminApi)) for op in route.operations.values()}
    assert used - {None} <= names
    assert all(r.check_str == "rule:admin_api" for r in RULES if r.name != "admin_api")
    assert next(r for r in RULES if r.name == "admin_api").check_str == "role:admin"


def test_every_request_is_logged_with_caller_and_outcome(client, caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="isthmus.admin.app"):
        client.get("/v1.0/pods", roles="member", project="demo-project")
        client.get("/", identity=None)
    denied, public = [r.getMessage() for r in caplog.records if r.name == "isthmus.admin.app"]
    assert denied.startswith("GET /v1.0/pods -> 403 in ")
    assert "user=user-of-demo-project project=demo-project request=req-" in denied
    assert denied.endswith(": policy does not allow admin_api:pods:list (the Admin API needs the admin role)")
    assert public.startswith("GET / -> 200 in ") and "user=None project=None" in public
