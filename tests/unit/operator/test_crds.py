"""The generated CRDs: shape, printer columns, CEL rules, and the checked-in copy."""

from __future__ import annotations

from pathlib import Path

import yaml

from isthmus.operator import crds

ROOT = Path(__file__).resolve().parents[3]


def test_checked_in_crds_equal_generated_output() -> None:
    # Regenerate with: isthmus operator crds > deploy/operator/crds.yaml
    assert (ROOT / "deploy" / "operator" / "crds.yaml").read_text() == crds.to_yaml()


def test_every_kind_has_status_subresource_printer_columns_and_conditions() -> None:
    documents = list(yaml.safe_load_all(crds.to_yaml()))
    assert [d["spec"]["names"]["kind"] for d in documents] == list(crds.KINDS)
    for doc in documents:
        version = doc["spec"]["versions"][0]
        assert doc["spec"]["group"] == "isthmus.dev" and version["name"] == "v1alpha1"
        assert version["subresources"] == {"status": {}}
        assert [c["name"] for c in version["additionalPrinterColumns"]][:2] == ["Ready", "Reason"]
        status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
        condition = status["conditions"]["items"]
        assert set(condition["required"]) == {"type", "status", "lastTransitionTime"}
        assert condition["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
        assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]


def test_multi_region_cloud_rules_and_defaults() -> None:
    spec = crds.multi_region_cloud_spec()
    rules = {r["message"] for r in spec["x-kubernetes-validations"]}
    assert "a region cannot be named like the central network's region" in rules
    regions = spec["properties"]["regions"]
    assert regions["x-kubernetes-list-type"] == "map" and regions["x-kubernetes-list-map-keys"] == ["name"]
    nova = regions["items"]["properties"]["nova"]
    assert "externalEndpoints" in nova["x-kubernetes-validations"][0]["rule"]
    assert regions["items"]["properties"]["neutron"]["properties"]["replicas"]["minimum"] == 0
    assert crds.region_spec()["x-kubernetes-validations"][0]["rule"] == "self.name == oldSelf.name"
    assert spec["properties"]["centralNetwork"]["properties"]["regionName"]["default"] == "CentralRegion"
