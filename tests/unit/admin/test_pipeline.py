"""The full middleware pipeline (no Keystone needed: requests without a token
never reach it): request ids, 401 with WWW-Authenticate, body size limit."""

from __future__ import annotations

import json

import pytest
import webob

from isthmus.admin import wsgi
from tests.unit.admin.conftest import handler_registry


@pytest.fixture
def app(tmp_path, engine):
    conf_file = tmp_path / "isthmus.conf"
    conf_file.write_text(
        "[keystone_authtoken]\n"
        "www_authenticate_uri = http://keystone.example:5000/v3\n"
        "auth_url = http://127.0.0.1:9/v3\n"
        "[oslo_middleware]\nmax_request_body_size = 1024\n"
        f"[database]\nconnection = sqlite:///{tmp_path / 'isthmus.sqlite'}\n")
    conf = wsgi.make_conf([], [str(conf_file)])
    return wsgi.build_app(conf, engine=engine, handlers=handler_registry())


def call(app, method, path, body=b"", headers=None):
    req = webob.Request.blank(path, method=method, headers=headers or {})
    if body:
        req.body = body
    return req.get_response(app)


def test_versions_answer_without_token_and_carry_a_request_id(app):
    resp = call(app, "GET", "/")
    assert resp.status_int == 200
    assert json.loads(resp.body)["versions"][0]["id"] == "v1.0"
    assert resp.headers["x-openstack-request-id"].startswith("req-")


def test_no_token_is_401_json_with_www_authenticate(app):
    resp = call(app, "GET", "/v1.0/pods")
    assert resp.status_int == 401
    assert json.loads(resp.body) == {"unauthorized": {
        "message": "authentication required: send a valid Keystone token in X-Auth-Token", "code": 401}}
    assert resp.headers["WWW-Authenticate"] == 'Keystone uri="http://keystone.example:5000/v3"'
    assert resp.headers["x-openstack-request-id"].startswith("req-")


def test_spoofed_identity_headers_are_stripped(app):
    """auth_token removes X-Identity-Status/X-Roles sent by the client."""
    resp = call(app, "GET", "/v1.0/pods", headers={"X-Identity-Status": "Confirmed", "X-Roles": "admin"})
    assert resp.status_int == 401


def test_oversized_body_is_rejected(app):
    resp = call(app, "POST", "/v1.0/pods", body=b"{" + b" " * 4096 + b"}")
    assert resp.status_int == 413


def test_application_attribute_is_lazy(monkeypatch):
    built = []

    def init_application():
        built.append(1)
        return "the-app"
    monkeypatch.setattr(wsgi, "_application", None)
    monkeypatch.setattr(wsgi, "init_application", init_application)
    assert built == []
    assert wsgi.application == "the-app" and wsgi.application == "the-app"
    assert built == [1]
    with pytest.raises(AttributeError):
        wsgi.not_there  # noqa: B018 - the attribute access is the test
