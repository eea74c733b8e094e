"""An object's id is one URL segment, whatever characters it holds:
an id is never read as a path, a query or the collection itself."""

from __future__ import annotations

import pytest

from isthmus.clients import NeutronClient

from .fakes import FakeAdapter, Response, as_adapter


def _client() -> tuple[NeutronClient, FakeAdapter]:
    not_found = {"NeutronError": {"type": "NetworkNotFound", "message": "not found"}}
    http = FakeAdapter(lambda call: Response(404, not_found))
    return NeutronClient(as_adapter(http), "CentralRegion"), http


@pytest.mark.parametrize("odd, segment", [
    ("?x=1", "%3Fx%3D1"), ("#frag", "%23frag"), ("%2F", "%252F"), ("a b", "a%20b"),
    ("\ud800", "%ED%A0%80"), ("é", "%C3%A9"),
])
def test_ids_are_percent_encoded_whole(odd, segment):
    neutron, http = _client()
    assert neutron.get("networks", odd) is None
    assert neutron.update("ports", odd, {"name": "x"}) is None
    assert neutron.delete("ports", odd) is False
    assert [c.url for c in http.calls] == [f"/v2.0/networks/{segment}", f"/v2.0/ports/{segment}",
                                           f"/v2.0/ports/{segment}"]


@pytest.mark.parametrize("nothing", ["", ".", "..", None, "/", "a/b", "../networks"])
def test_ids_that_would_name_the_collection_name_nothing_and_call_nobody(nothing):
    neutron, http = _client()
    assert neutron.get("networks", nothing) is None
    assert neutron.update("ports", nothing, {"name": "x"}) is None
    assert neutron.action("address-groups", nothing, "add_addresses", {"addresses": []}) is None
    assert neutron.delete("ports", nothing) is False
    assert http.calls == []


def test_a_uuid_goes_as_it_is():
    neutron, http = _client()
    neutron.get("security-groups", "8e9c4d3c-0000-4000-8000-000000000000")
    assert http.calls[0].url == "/v2.0/security-groups/8e9c4d3c-0000-4000-8000-000000000000"


def test_a_member_url_answered_with_something_else_is_no_object():
    http = FakeAdapter(lambda call: Response(200, {"networks": []}))
    assert NeutronClient(as_adapter(http), "CentralRegion").get("networks", "x") is None
