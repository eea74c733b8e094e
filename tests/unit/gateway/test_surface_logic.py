"""Pure logic of Cinder attachments and the aggregates view."""

from __future__ import annotations

import json
from typing import Any

import pytest

from isthmus.gateway.aggregates import gateway_number, identity_of, shown
from isthmus.gateway.attachments import AttachmentCreate, attachment_create, same_region
from isthmus.gateway.faults import Fault
from isthmus.registry import Pod

V, S = "0b6c8f2e-1111-4a57-9d0f-0c3c1f6f2a11", "9d1e7a3b-2222-4a57-9d0f-0c3c1f6f2a11"


def body(doc) -> bytes:
    return json.dumps(doc).encode()


def test_attachment_create_reads_volume_and_server():
    assert attachment_create(body({"attachment": {"volume_uuid": V, "instance_uuid": S}})) == AttachmentCreate(V, S)
    assert attachment_create(body({"attachment": {"volume_uuid": V}})) == AttachmentCreate(V, None)


@pytest.mark.parametrize("raw, field", [
    (b"{", "body"),
    (body([]), "attachment"),
    (body({"attachment": "x"}), "attachment"),
    (body({"attachment": {}}), "attachment.volume_uuid"),
    (body({"attachment": {"volume_uuid": 3}}), "attachment.volume_uuid"),
    (body({"attachment": {"volume_uuid": V, "instance_uuid": ["x"]}}), "attachment.instance_uuid"),
])
def test_attachment_create_malformed_is_a_400_naming_the_field(raw, field):
    with pytest.raises(Fault) as err:
        attachment_create(raw)
    assert err.value.status == 400 and field in err.value.message


def test_same_region():
    assert same_region(V, "RegionOne", S, "RegionOne") == "RegionOne"
    assert same_region(V, "RegionTwo", None, None) == "RegionTwo"
    for args, status in (((V, None, None, None), 404), ((V, "RegionOne", S, None), 404),
                         ((V, "RegionOne", S, "RegionTwo"), 400)):
        with pytest.raises(Fault) as err:
            same_region(*args)
        assert err.value.status == status
    with pytest.raises(Fault) as err:
        same_region(V, "RegionOne", S, "RegionTwo")
    assert "same region" in err.value.message


def test_aggregate_identity_prefers_the_uuid():
    assert identity_of("RegionOne", {"id": 3, "uuid": "u"}) == "u"
    assert identity_of("RegionOne", {"id": 3}) == "RegionOne/3"


def test_aggregate_shown_with_gateway_number_and_top_az():
    pod = Pod("p", "RegionOne", az_name="az1", pod_az_name="nova")
    regional: dict[str, Any] = {"id": 3, "uuid": "u", "name": "a", "availability_zone": "nova",
                "metadata": {"availability_zone": "nova", "k": "v"}, "hosts": ["h"]}
    out = shown(regional, 17, pod, with_uuid=False)
    assert out["id"] == 17 and "uuid" not in out and out["hosts"] == ["h"]
    assert out["availability_zone"] == "az1" and out["metadata"] == {"availability_zone": "az1", "k": "v"}
    assert regional["id"] == 3 and regional["metadata"]["availability_zone"] == "nova"  # not mutated
    same = Pod("p", "RegionOne", az_name="az1", pod_az_name="")
    assert shown(regional, 17, same, with_uuid=True)["availability_zone"] == "nova"
    assert shown(regional, 17, same, with_uuid=True)["uuid"] == "u"


@pytest.mark.parametrize("raw", ["x", "0", "-2", "1.5"])
def test_aggregate_number_malformed_is_400(raw):
    with pytest.raises(Fault) as err:
        gateway_number(raw)
    assert err.value.status == 400 and "id" in err.value.message


def test_aggregate_number():
    assert gateway_number("42") == 42
