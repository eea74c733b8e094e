"""POST/GET/DELETE /v1.0/pods."""

from __future__ import annotations

import uuid

import pytest

from tests.unit.admin.conftest import fault


def test_create_central_then_regional_pods(client):
    central = client.post("/v1.0/pods", {"pod": {"region_name": "CentralRegion"}})
    assert central.status == 200
    pod = central.body["pod"]
    assert uuid.UUID(pod["pod_id"])
    assert pod == {"pod_id": pod["pod_id"], "region_name": "CentralRegion", "az_name": "",
                   "pod_az_name": "", "dc_name": ""}
    one = client.post("/v1.0/pods", {"pod": {"region_name": "RegionOne", "az_name": "az1",
                                             "pod_az_name": "az1-a", "dc_name": "dc1"}}).body["pod"]
    assert (one["region_name"], one["az_name"], one["pod_az_name"], one["dc_name"]) == (
        "RegionOne", "az1", "az1-a", "dc1")
    listed = client.get("/v1.0/pods").body["pods"]
    assert [p["region_name"] for p in listed] == ["CentralRegion", "RegionOne"]
    assert client.get(f"/v1.0/pods/{one['pod_id']}").body == {"pod": one}


def test_central_pod_gets_no_pod_az_name(client):
    pod = client.post("/v1.0/pods", {"pod": {"region_name": "CentralRegion", "pod_az_name": "x"}}).body["pod"]
    assert pod["pod_az_name"] == ""


def test_b1_conflicts(client, pods):
    assert "central pod exists" in fault(client.post("/v1.0/pods", {"pod": {"region_name": "Other"}}), 409)
    assert "region_name" in fault(
        client.post("/v1.0/pods", {"pod": {"region_name": "CentralRegion", "az_name": "az3"}}), 409)
    assert "region_name" in fault(
        client.post("/v1.0/pods", {"pod": {"region_name": "RegionOne", "az_name": "az1"}}), 409)
    answer = client.post("/v1.0/pods", {"pod": {"region_name": "RegionTwo", "az_name": "az9"}})
    assert answer.body == {"conflictingRequest": {
        "message": "region_name: a pod for region 'RegionTwo' exists", "code": 409}}


@pytest.mark.parametrize("pod,field", [
    ({"az_name": "az1"}, "region_name: is required"),
    ({"region_name": "", "az_name": "az1"}, "region_name: is required"),
    ({"region_name": "   "}, "region_name: is required"),
    ({"region_name": 7}, "region_name: must be a string"),
    ({"region_name": "R", "az_name": ["az1"]}, "az_name: must be a string"),
    ({"region_name": "R", "color": "red"}, "pod: unknown field(s) color"),
    ({"region_name": "R" * 256}, "region_name: longer than 255 characters"),
])
def test_bad_pods_are_400_naming_the_field(client, pod, field):
    assert fault(client.post("/v1.0/pods", {"pod": pod}), 400).startswith(field)


@pytest.mark.parametrize("raw,message", [
    (b"", 'body: expected a JSON object {"pod": {...}}'),
    (b"{not json", "body: not valid JSON"),
    (b"[1]", 'body: expected a JSON object {"pod": {...}}'),
    (b'{"pods": {}}', 'body: expected a JSON object {"pod": {...}}'),
    (b'{"pod": "x"}', "pod: must be an object"),
    (b'{"pod": {"region_name": "R"}, "x": 1}', "body: unexpected key(s) x next to 'pod'"),
])
def test_malformed_bodies_are_400(client, raw, message):
    assert fault(client.call("POST", "/v1.0/pods", raw=raw), 400) == message


def test_show_and_delete_unknown_pod_are_404(client):
    assert fault(client.get("/v1.0/pods/nope"), 404) == "pod nope not found"
    assert fault(client.delete("/v1.0/pods/nope"), 404) == "pod nope not found"


def test_delete_pod(client, pods):
    answer = client.delete(f"/v1.0/pods/{pods['RegionTwo']['pod_id']}")
    assert (answer.status, answer.body) == (200, {})
    assert [p["region_name"] for p in client.get("/v1.0/pods").body["pods"]] == ["CentralRegion", "RegionOne"]
    fault(client.get(f"/v1.0/pods/{pods['RegionTwo']['pod_id']}"), 404)


def test_pod_list_takes_no_filters(client):
    assert fault(client.get("/v1.0/pods?region_name=x"), 400) == "unsupported filter(s): region_name (supported: none)"
