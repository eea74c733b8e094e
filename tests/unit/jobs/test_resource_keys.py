"""Job types declare the named parts of their key (the Admin API's job schemas)."""

from __future__ import annotations

import pytest

from isthmus.jobs import HandlerRegistry, InvalidJobRequest


def noop(ctx) -> None:
    return None


def test_default_is_one_resource_id_key():
    registry = HandlerRegistry()
    registry.register("plain", noop)
    spec = registry.get("plain")
    assert spec.resource_keys == ("resource_id",)
    assert spec.join_resource({"resource_id": "net-1"}) == "net-1"
    assert spec.split_resource("a#b") == {"resource_id": "a#b"}


def test_composite_keys_join_and_split_in_declared_order():
    registry = HandlerRegistry()

    @registry.handler("shadow_port", resource_keys=("pod_id", "port_id"))
    def shadow(ctx) -> None:
        return None

    spec = registry.get("shadow_port")
    assert spec.join_resource({"port_id": "p", "pod_id": "R1"}) == "R1#p"
    assert spec.split_resource("R1#p") == {"pod_id": "R1", "port_id": "p"}
    assert spec.split_resource("no-separator") == {"resource_id": "no-separator"}
    assert registry.schemas() == {"shadow_port": ("pod_id", "port_id")}


@pytest.mark.parametrize("resource,message", [
    ({"pod_id": "R1"}, "resource: missing key(s) port_id (type t takes pod_id, port_id)"),
    ({"pod_id": "R1", "port_id": "p", "x": "1"}, "resource: unexpected key(s) x (type t takes pod_id, port_id)"),
    ({"pod_id": " ", "port_id": "p"}, "resource.pod_id: must be a non-empty string"),
    ({"pod_id": "a#b", "port_id": "p"}, "resource.pod_id: must not contain '#'"),
    (["pod_id"], "resource: must be an object"),
])
def test_join_rejects_anything_but_the_exact_keys(resource, message):
    registry = HandlerRegistry()
    registry.register("t", noop, resource_keys=("pod_id", "port_id"))
    with pytest.raises(InvalidJobRequest) as err:
        registry.get("t").join_resource(resource)
    assert str(err.value) == message


@pytest.mark.parametrize("keys", [(), ("a", "a"), ("Bad",), ("has space",), ("",)])
def test_bad_declarations_are_refused(keys):
    with pytest.raises(ValueError, match="resource_keys"):
        HandlerRegistry().register("t", noop, resource_keys=keys)
