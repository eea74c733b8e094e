from isthmus.gateway import links
from isthmus.gateway.apis import COMPUTE, VOLUME
from isthmus.gateway.call import match_api as _match_api
from isthmus.gateway.call import split_project as _split_project
from isthmus.gateway.proxy import request_headers, response_headers


def test_service_root_and_project_template():
    assert links.service_root("http://h:8774/compute/v2.1/abc") == "http://h:8774/compute"
    assert links.service_root("http://h:8776/v3") == "http://h:8776"
    assert links.strip_project("http://h/volume/v3/$(project_id)s") == "http://h/volume/v3"


def test_rewriter_matches_whole_roots_only():
    rw = links.Rewriter(["http://127.0.0.1:2101", "http://127.0.0.1:21011"], "http://gw:9/compute")
    body = '{"href": "http://127.0.0.1:21011/v2.1/servers/x", "b": "http://127.0.0.1:2101/servers/y"}'
    assert rw.text(body) == '{"href": "http://gw:9/compute/v2.1/servers/x", "b": "http://gw:9/compute/servers/y"}'
    assert rw.text("http://127.0.0.1:210111/x") == "http://127.0.0.1:210111/x"


def test_paths():
    assert _match_api("/compute/v2.1/servers") == (COMPUTE, ["servers"])
    assert _match_api("/v2.1/abc/servers/") == (COMPUTE, ["abc", "servers"])
    assert _match_api("/volume/v3/p/volumes/detail") == (VOLUME, ["p", "volumes", "detail"])
    assert _match_api("/v2.10/x")[0] is None
    pid = "0123456789abcdef0123456789abcdef"
    assert _split_project(COMPUTE, [pid, "servers"]) == (pid, ["servers"])
    assert _split_project(COMPUTE, ["servers", pid]) == (None, ["servers", pid])
    assert _split_project(VOLUME, ["someproject", "volumes"]) == ("someproject", ["volumes"])


def test_hop_by_hop_and_host_never_forwarded():
    out = request_headers({"Host": "gw", "Connection": "keep-alive, X-Drop", "X-Drop": "1", "Keep-Alive": "5",
                           "Transfer-Encoding": "chunked", "Content-Length": "10", "X-Auth-Token": "t",
                           "X-Roles": "admin", "X-Identity-Status": "Confirmed", "Content-Type": "application/json",
                           "OpenStack-API-Version": "volume 3.5"})
    assert dict(out) == {"X-Auth-Token": "t", "Content-Type": "application/json"}
    back = response_headers({"Connection": "close", "Content-Length": "3", "Location": "x", "Server": "s"})
    assert dict(back) == {"Location": "x"}
