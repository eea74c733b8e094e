"""Defaulting from the CRD schema, and the Python copies of the CEL rules (table-driven)."""

from __future__ import annotations

import pytest

from isthmus.operator import model
from tests.unit.operator.conftest import make_cloud


def test_defaults_come_from_the_schema() -> None:
    spec = model.defaulted_spec("MultiRegionCloud", make_cloud()["spec"])
    assert spec["identity"]["regionName"] == "CentralRegion"
    assert spec["identity"]["replicas"] == 1
    assert spec["centralNetwork"] == {"enabled": True, "regionName": "CentralRegion", "replicas": 1,
                                      "adminAPI": {"replicas": 1, "port": 19999}, "xjob": {"replicas": 1}}
    region = spec["regions"][0]
    assert region["neutron"]["crossRegion"]["enabled"] is True
    assert region["nova"] == {"enabled": False, "mode": "Deploy", "replicas": 1}
    assert spec["cloudControllerManager"]["target"] == {"namespace": "kube-system", "secretName": "cloud-config"}


def test_defaulting_keeps_given_values_and_does_not_mutate_input() -> None:
    raw = make_cloud(identity={"replicas": 3})["spec"]
    spec = model.defaulted_spec("MultiRegionCloud", raw)
    assert spec["identity"]["replicas"] == 3
    assert "regionName" not in raw["identity"]


def test_a_null_section_is_dropped_then_defaulted_as_the_api_server_does() -> None:
    # A merge patch {"regions": [{"name": "RegionOne", "nova": null}]} stores the null.
    raw = make_cloud(regions=[{"name": "RegionOne", "nova": None}])["spec"]
    spec = model.defaulted_spec("MultiRegionCloud", raw)
    assert spec["regions"][0]["nova"] == {"enabled": False, "mode": "Deploy", "replicas": 1}
    assert model.validate_cloud(spec) == []


def region(name: str, **extra):
    return {"name": name, **extra}


CASES = [
    ("valid", {}, None),
    ("duplicate region", {"regions": [region("RegionOne"), region("RegionOne")]}, "listed twice"),
    ("central name", {"regions": [region("CentralRegion")]}, "central network's region"),
    ("identity name", {"identity": {"regionName": "RegionX"}, "regions": [region("RegionX")]}, "identity region"),
    ("bad name", {"regions": [region("1bad")]}, "not a valid region name"),
    ("negative replicas", {"regions": [region("R1", neutron={"replicas": -1})]}, "non-negative"),
    ("external without urls", {"regions": [region("R1", nova={"enabled": True, "mode": "External"})]},
     "mode External needs"),
    ("external with urls", {"regions": [region("R1", nova={"enabled": True, "mode": "External", "externalEndpoints": {
        "public": "https://p", "internal": "http://i"}})]}, None),
    ("tls without cert", {"tls": {"enabled": True}}, "publicCertSecret"),
    ("no regions", {"regions": []}, "at least one region"),
    ("bad rotation interval", {"identity": {"fernetRotationInterval": "1d"}},
     "spec.identity.fernetRotationInterval: '1d' is not a duration"),
    ("rotation that would need too many keys", {"identity": {"fernetRotationInterval": "30m"}},
     "spec.identity.fernetRotationInterval: 0:30:00 would keep 146 fernet keys"),
]


@pytest.mark.parametrize("overrides,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validation(overrides, expected) -> None:
    errors = model.validate_cloud(model.defaulted_spec("MultiRegionCloud", make_cloud(**overrides)["spec"]))
    if expected is None:
        assert errors == []
    else:
        assert any(expected in error for error in errors), errors
