"""Spec defaulting and the checks the CRDs' CEL rules make, in Python.

A real API server applies the CRD defaults and CEL rules before the operator
sees an object; ``isthmus operator render`` has no API server and the kmock test
tier has none either, so the operator applies the same defaults itself (from
the very schema the CRDs are generated from, so they cannot differ) and repeats
the rules as plain checks. Applying defaults twice is harmless.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from isthmus.operator import crds, fernet


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Structural defaulting as kube-apiserver does it: a null property that is not
    ``nullable`` is dropped (a merge patch's ``{"nova": null}`` inside a list keeps
    the null), a missing property with a ``default`` gets a copy of it, then
    defaults apply inside it."""
    if isinstance(value, dict) and schema.get("type") == "object":
        for name, sub in schema.get("properties", {}).items():
            if name in value and value[name] is None and not sub.get("nullable"):
                del value[name]
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                value[name] = apply_defaults(sub, value[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name in list(value):
                if name not in schema.get("properties", {}):
                    value[name] = apply_defaults(extra, value[name])
    elif isinstance(value, list) and schema.get("type") == "array":
        return [apply_defaults(schema.get("items", {}), item) for item in value]
    return value


def defaulted_spec(kind: str, spec: dict[str, Any] | None) -> dict[str, Any]:
    """A deep copy of ``spec`` with the CRD's defaults applied."""
    _, _, schema = crds.KINDS[kind]
    defaulted: dict[str, Any] = apply_defaults(schema(), copy.deepcopy(dict(spec or {})))
    return defaulted


class SpecError(ValueError):
    """The spec breaks a rule the CRD's schema or CEL rules enforce."""


_REGION_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


def _replicas(path: str, section: dict[str, Any], errors: list[str]) -> None:
    value = section.get("replicas")
    if value is not None and (not isinstance(value, int) or value < 0):
        errors.append(f"{path}.replicas: must be a non-negative integer, got {value!r}")


def validate_cloud(spec: dict[str, Any]) -> list[str]:
    """The MultiRegionCloud rules (on a defaulted spec); every problem, in order."""
    errors: list[str] = []
    for key in ("secret", "database"):
        if not spec.get(key):
            errors.append(f"spec.{key} is required")
    regions = spec.get("regions") or []
    if not regions:
        errors.append("spec.regions: at least one region is required")
    central = spec["centralNetwork"]["regionName"]
    identity = spec["identity"]["regionName"]
    seen: set[str] = set()
    for i, region in enumerate(regions):
        name = region.get("name", "")
        path = f"spec.regions[{i}]"
        if not _REGION_NAME.match(name):
            errors.append(f"{path}.name: {name!r} is not a valid region name")
        if name in seen:
            errors.append(f"{path}.name: region {name!r} is listed twice")
        seen.add(name)
        if name == central:
            errors.append(f"{path}.name: {name!r} is the central network's region")
        if name == identity:
            errors.append(f"{path}.name: {name!r} is the identity region")
        _replicas(f"{path}.neutron", region["neutron"], errors)
        for service in ("nova", "cinder"):
            section = region[service]
            _replicas(f"{path}.{service}", section, errors)
            urls = section.get("externalEndpoints") or {}
            if (section["enabled"] and section["mode"] == "External"
                    and not (urls.get("public") and urls.get("internal"))):
                errors.append(f"{path}.{service}: mode External needs externalEndpoints.public and .internal")
    for name in ("identity", "centralNetwork", "apiGateway"):
        _replicas(f"spec.{name}", spec[name], errors)
    try:
        problem = fernet.KeyPolicy.of(spec["identity"]).problem()
    except ValueError as exc:
        problem = str(exc)
    if problem:
        errors.append(f"spec.identity.{problem}")
    if spec["identity"].get("external") and spec["identity"].get("database"):
        errors.append("spec.identity: external and database are exclusive")
    if spec["tls"]["enabled"] and not spec["tls"].get("publicCertSecret"):
        errors.append("spec.tls: enabled needs publicCertSecret")
    ccm = spec["cloudControllerManager"]
    if ccm["enabled"] and not ccm.get("credentialsSecretRef"):
        errors.append("spec.cloudControllerManager: enabled needs credentialsSecretRef")
    return errors
