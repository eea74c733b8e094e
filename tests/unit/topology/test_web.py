"""The topology page, its fragment and /model.json from a fixture model (WSGI, no browser)."""

from __future__ import annotations

import html
import json
import re
import threading
import urllib.request

import pytest
import webob

from isthmus.network import SHADOW_OWNER
from isthmus.topology import model, web
from tests.unit.topology import fixtures as fx


def app_for(snapshot=None, error: str | None = None) -> web.TopologyApp:
    state = web.State()
    state.set(model.build(snapshot or fx.snapshot()) if snapshot is not False else None, error)
    return web.TopologyApp(state, interval=2)


def get(app: web.TopologyApp, path: str) -> webob.Response:
    return webob.Request.blank(path).get_response(app)


def boxes(text: str, attr: str, value: str) -> list[str]:
    return re.findall(rf'<[^>]*{attr}="{re.escape(value)}"[^>]*>', text)


def test_page_has_regions_as_columns_and_refresh_script() -> None:
    resp = get(app_for(), "/")
    assert resp.status_int == 200 and resp.content_type == "text/html"
    text = resp.text
    assert "repeat(3," in text  # central + two regions
    for region in ("CentralRegion", "RegionOne", "RegionTwo"):
        assert re.search(rf'class="box region healthy" data-region="{region}"', text)
    assert 'fetch("/fragment"' in text and "const interval = 2000;" in text


def test_network_band_with_copies_servers_and_shadows() -> None:
    text = get(app_for(), "/fragment").text
    copies = boxes(text, "data-network", fx.NET)
    assert len(copies) == 4  # the band's label and a copy per region
    servers = re.findall(r'class="box port server" data-port="([^"]+)" data-region="([^"]+)"', text)
    shadows = re.findall(r'class="box port shadow" data-port="([^"]+)" data-region="([^"]+)"', text)
    assert sorted(servers) == sorted([(fx.PORT1, "RegionOne"), (fx.PORT2, "RegionTwo")])
    assert sorted(shadows) == sorted([(fx.PORT2, "RegionOne"), (fx.PORT1, "RegionTwo")])
    assert "vxlan/1001" in text and "shadow of tour-regionone" in text


def test_every_box_carries_its_json() -> None:
    text = get(app_for(), "/fragment").text
    match = re.search(rf'data-port="{fx.PORT1}" data-region="RegionOne" data-kind="server"\s+'
                      r'data-title="[^"]*" data-json="([^"]*)"', text)
    assert match
    data = json.loads(html.unescape(match.group(1)))
    assert data["raw"]["mac_address"] == "fa:16:3e:00:00:11" and data["server_name"] == "tour-regionone"


def test_unhealthy_region_drift_and_failed_jobs_are_visible() -> None:
    snap = fx.region_two_down(fx.snapshot())
    snap.regions[0].networks = [fx.network(name="stale")]
    text = get(app_for(snap), "/fragment").text
    assert re.search(r'class="box region unhealthy" data-region="RegionTwo"', text)
    assert "UNHEALTHY" in text and "ConnectFailure" in text
    assert re.search(r'class="box copy present drift"\s+data-network="[^"]+" data-region="RegionOne"', text)
    assert "name: tour-net → stale" in text
    assert re.search(r'class="box copy unknown"\s+data-network="[^"]+" data-region="RegionTwo"', text)
    assert 'data-backlog="1"' in text and 'class="box failed-job" data-job="j2"' in text


def test_missing_shadow_shown() -> None:
    snap = fx.snapshot()
    snap.regions[1].ports = [p for p in snap.regions[1].ports or [] if p["device_owner"] != SHADOW_OWNER]
    assert 'data-kind="missing-shadow"' in get(app_for(snap), "/fragment").text


def test_model_json_and_before_the_first_picture() -> None:
    data = get(app_for(), "/model.json").json
    assert data["error"] is None and data["topology"]["networks"][0]["id"] == fx.NET
    empty = app_for(False, error="ConnectFailure: keystone")
    assert "Collecting the first picture" in get(empty, "/fragment").text
    assert "keystone" in get(empty, "/").text
    assert get(empty, "/model.json").json == {"error": "ConnectFailure: keystone", "topology": None}


def test_unknown_path_and_method() -> None:
    assert get(app_for(), "/nope").status_int == 404
    assert webob.Request.blank("/", method="POST").get_response(app_for()).status_int == 405


def test_refresher_keeps_the_last_good_model_on_failure() -> None:
    state = web.State()
    answers = [model.build(fx.snapshot()), RuntimeError("keystone down")]

    def collect():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    refresher = web.Refresher(collect, state, interval=60)
    refresher.refresh_once()
    refresher.refresh_once()
    topology, error = state.get()
    assert topology is not None and error == "RuntimeError: keystone down"


@pytest.mark.component  # an HTTP server (tests/tiers.py)
def test_served_over_http_on_a_free_port() -> None:
    state = web.State()
    state.set(model.build(fx.snapshot()), None)
    server = web.make_server(web.TopologyApp(state, 2), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/model.json", timeout=5) as resp:
            assert json.load(resp)["topology"]["central_region"] == "CentralRegion"
    finally:
        server.shutdown()
        server.server_close()


def test_a_foreign_host_header_is_refused() -> None:
    """Issue 26 item 13: /model.json answered 200 to ``Host: evil.example`` (DNS
    rebinding: any web site the user visits could read the admin view)."""
    app = app_for()
    for host in ("evil.example", "evil.example:8390", "127.0.0.1.evil.example"):
        req = webob.Request.blank("/model.json", headers={"Host": host})
        assert req.get_response(app).status_int == 403, host
    for host in ("localhost:8390", "127.0.0.1", "[::1]:8390"):
        req = webob.Request.blank("/model.json", headers={"Host": host})
        assert req.get_response(app).status_int == 200, host
    wide = web.TopologyApp(web.State(), 2, web.Access.for_bind("0.0.0.0", ["topo.example.org"]))
    assert webob.Request.blank("/", headers={"Host": "topo.example.org"}).get_response(wide).status_int == 200
    assert webob.Request.blank("/", headers={"Host": "10.0.0.9"}).get_response(wide).status_int == 403


def test_a_token_guards_every_path_and_the_page_keeps_it_in_a_cookie() -> None:
    state = web.State()
    state.set(model.build(fx.snapshot()), None)
    app = web.TopologyApp(state, 2, web.Access.for_bind("127.0.0.1", token="s3cret"))
    for path in ("/", "/fragment", "/model.json"):
        assert get(app, path).status_int == 401
    assert webob.Request.blank("/model.json", headers={"Authorization": "Bearer wrong"}).get_response(
        app).status_int == 401
    assert webob.Request.blank("/model.json", headers={"Authorization": "Bearer s3cret"}).get_response(
        app).status_int == 200
    first = get(app, "/?token=s3cret")
    assert first.status_int == 200
    cookie = first.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert webob.Request.blank("/fragment", headers={"Cookie": cookie.split(";")[0]}).get_response(
        app).status_int == 200
