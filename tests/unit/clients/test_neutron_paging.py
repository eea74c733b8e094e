"""NeutronClient.list returns every item, however the server pages, or raises."""

from __future__ import annotations

import pytest

from isthmus.clients import NeutronClient, Unavailable

from .fakes import Call, FakeAdapter, Response, as_adapter, paged_server


def _ports(n: int) -> list[dict]:
    return [{"id": f"p{i:04d}"} for i in range(n)]


def _client(answer) -> tuple[NeutronClient, FakeAdapter]:
    http = FakeAdapter(answer)
    return NeutronClient(as_adapter(http), "RegionOne"), http


def test_unpaged_list_is_one_request():
    neutron, http = _client(paged_server("ports", _ports(3), page_size=1000))
    assert neutron.list("ports", network_id="n") == _ports(3)
    assert len(http.calls) == 1 and http.calls[0].params == {"network_id": "n"}


def test_follows_next_links_to_the_end_keeping_filters():
    neutron, http = _client(paged_server("ports", _ports(7), page_size=3))
    assert neutron.list("ports", network_id="n") == _ports(7)
    assert [c.params for c in http.calls] == [
        {"network_id": "n"},
        {"network_id": "n", "limit": "3", "marker": "p0002"},
        {"network_id": "n", "limit": "3", "marker": "p0005"},
    ]


def test_a_list_ending_exactly_at_the_limit_reads_one_empty_page():
    neutron, http = _client(paged_server("ports", _ports(6), page_size=3))
    assert neutron.list("ports") == _ports(6)
    assert len(http.calls) == 3  # the third page is empty and unlinked


def test_hyphenated_collections_page_under_their_body_key():
    rules = [{"id": f"r{i}"} for i in range(5)]
    neutron, _ = _client(paged_server("security-group-rules", rules, page_size=2, key="security_group_rules"))
    assert neutron.list("security-group-rules") == rules


def test_a_repeated_marker_raises_instead_of_looping():
    page = {"ports": _ports(2), "ports_links": [{"rel": "next", "href": "/v2.0/ports?limit=2&marker=p0001"}]}
    neutron, http = _client(lambda call: Response(200, page))
    with pytest.raises(Unavailable, match="repeated marker p0001"):
        neutron.list("ports")
    assert len(http.calls) == 2


def test_a_marker_cycle_raises():
    def answer(call: Call) -> Response:
        marker = "a" if (call.params or {}).get("marker") != "a" else "b"
        return Response(200, {"ports": [{"id": marker}],
                              "ports_links": [{"rel": "next", "href": f"/v2.0/ports?marker={marker}"}]})
    neutron, _ = _client(answer)
    with pytest.raises(Unavailable, match="repeated marker"):
        neutron.list("ports")


def test_endless_fresh_markers_are_bounded(monkeypatch):
    from isthmus.clients import neutron as module
    monkeypatch.setattr(module, "MAX_PAGES", 5)
    count = iter(range(10**6))

    def answer(call: Call) -> Response:
        item = f"x{next(count)}"
        return Response(200, {"ports": [{"id": item}],
                              "ports_links": [{"rel": "next", "href": f"/v2.0/ports?marker={item}"}]})
    neutron, http = _client(answer)
    with pytest.raises(Unavailable, match="longer than 5 pages"):
        neutron.list("ports")
    assert len(http.calls) == 5


def test_a_next_link_without_marker_pages_from_the_last_id():
    items = _ports(3)

    def answer(call: Call) -> Response:
        marker = (call.params or {}).get("marker")
        if marker is None:
            return Response(200, {"ports": items[:2], "ports_links": [{"rel": "next", "href": "/v2.0/ports?limit=2"}]})
        assert marker == "p0001"
        return Response(200, {"ports": items[2:]})
    neutron, _ = _client(answer)
    assert neutron.list("ports") == items


def test_a_full_unlinked_page_of_a_known_size_is_followed():
    """A caller's own ``limit`` is a page size, never a cap on the list."""
    neutron, http = _client(lambda call: Response(200, {"ports": _ports(6)[:2] if "marker" not in call.params
                                                        else [] if call.params["marker"] == "p0003"
                                                        else _ports(6)[2:4]}))
    assert neutron.list("ports", limit=2) == _ports(4)
    assert [(c.params or {}).get("marker") for c in http.calls] == [None, "p0001", "p0003"]


def test_a_marker_deleted_between_pages_raises_rather_than_truncating():
    server = paged_server("ports", _ports(5), page_size=2)

    def answer(call: Call) -> Response:
        if (call.params or {}).get("marker") == "p0001":
            return Response(404, {"NeutronError": {"type": "PortNotFound",
                                                   "message": "Port p0001 could not be found."}})
        return server(call)
    neutron, _ = _client(answer)
    with pytest.raises(Unavailable, match="lost marker p0001"):
        neutron.list("ports")


def test_a_collection_the_server_does_not_serve_is_unavailable_never_empty():
    # After a restart, neutron-server answers 404 HTTPNotFound for an extension's
    # URLs until its plugins are loaded: "no routers" would remake them all.
    neutron, _ = _client(lambda call: Response(404, {"NeutronError": {"type": "HTTPNotFound",
                                                                      "message": "The resource could not be found."}}))
    with pytest.raises(Unavailable, match="does not serve routers"):
        neutron.list("routers")
    with pytest.raises(Unavailable):
        neutron.get("routers", "r1")
    with pytest.raises(Unavailable):
        neutron.create("routers", {"name": "r"})


def test_a_missing_object_is_none():
    neutron, _ = _client(lambda call: Response(404, {"NeutronError": {"type": "RouterNotFound", "message": "gone"}}))
    assert neutron.get("routers", "r1") is None


def test_a_5xx_on_a_later_page_raises():
    server = paged_server("ports", _ports(5), page_size=2)
    neutron, _ = _client(lambda call: Response(503, None) if call.params.get("marker") else server(call))
    with pytest.raises(Unavailable):
        neutron.list("ports")
