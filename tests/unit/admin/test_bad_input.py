"""Input that once made the Admin API answer 500: each is now a 4xx
naming what is wrong."""

from __future__ import annotations

import pytest

from .conftest import fault


@pytest.mark.parametrize("depth", [1000, 100_000])
@pytest.mark.parametrize("path", ["/v1.0/pods", "/v1.0/routings", "/v1.0/bindings", "/v1.0/jobs"])
def test_json_nested_deeper_than_the_parser_goes_is_400(client, path, depth):
    raw = ("[" * depth + "]" * depth).encode()
    assert "nested too deeply" in fault(client.call("POST", path, raw=raw), 400)


def test_a_deep_value_inside_a_field_is_400(client):
    raw = b'{"pod": {"region_name": ' + b"[" * 5000 + b"]" * 5000 + b"}}"
    assert "nested too deeply" in fault(client.call("POST", "/v1.0/pods", raw=raw), 400)


@pytest.mark.parametrize("number", [str(2**63), str(2**64), str(-(2**63) - 1), "1" + "0" * 40])
@pytest.mark.parametrize("collection", ["routings", "bindings"])
def test_ids_beyond_64_bits_are_not_found(client, collection, number):
    for method in ("GET", "DELETE"):
        assert "not found" in fault(client.call(method, f"/v1.0/{collection}/{number}"), 404)


def test_a_routing_update_on_an_id_beyond_64_bits_is_not_found(client):
    body = {"routing": {"top_id": "t"}}
    assert "not found" in fault(client.put(f"/v1.0/routings/{2**64}", body), 404)


@pytest.mark.parametrize("name", ["limit", "marker"])
@pytest.mark.parametrize("collection", ["routings", "bindings"])
def test_paging_numbers_beyond_64_bits_are_400_naming_the_parameter(client, collection, name):
    assert name in fault(client.get(f"/v1.0/{collection}?{name}={2**64}"), 400)


def test_a_path_not_utf8_once_decoded_is_400(client):
    assert "path" in fault(client.get("/v1.0/pods/%ff"), 400)


def test_a_query_not_utf8_once_decoded_is_400(client):
    assert "query" in fault(client.get("/v1.0/routings?top_id=%ED%A0%80"), 400)
