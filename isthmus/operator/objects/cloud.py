"""MultiRegionCloud: its child resources, and the cert-manager Certificate for the whole cloud."""


from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from isthmus.operator import API_VERSION, model
from isthmus.operator.objects.builders import Endpoints, Obj, metadata
from isthmus.operator.objects.central import central_endpoints
from isthmus.operator.objects.gateway import gateway_endpoints
from isthmus.operator.objects.identity import identity_endpoints
from isthmus.operator.objects.region import region_endpoints

# --- MultiRegionCloud: the child resources ---------------------------------------------------------------------------

CHILD_SUFFIX = {"IdentityService": "identity", "CentralNetwork": "central-network", "APIGateway": "api-gateway",
                "CloudControllerConfig": "ccm"}
COMMON_KEYS = ("version", "secret", "images", "nodeSelector", "tls", "database")


def child_name(cloud: str, kind: str, region: str | None = None) -> str:
    if kind == "Region":
        return f"{cloud}-region-{(region or '').lower()}"
    return f"{cloud}-{CHILD_SUFFIX[kind]}"


def _child(mrc: Obj, kind: str, spec: dict[str, Any], region: str | None = None) -> Obj:
    name = child_name(mrc["metadata"]["name"], kind, region)
    meta = metadata(mrc, name, kind.lower(), region)
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


def cloud_children(mrc: Obj) -> list[Obj]:
    """The child resources of a MultiRegionCloud (only the enabled ones)."""
    spec = model.defaulted_spec("MultiRegionCloud", mrc.get("spec"))
    cloud = mrc["metadata"]["name"]
    common = {key: spec[key] for key in COMMON_KEYS if key in spec}
    identity_name = child_name(cloud, "IdentityService")
    refs = {"keystoneRef": identity_name, "centralRegionName": spec["centralNetwork"]["regionName"],
            "identityRegionName": spec["identity"]["regionName"]}
    if spec["centralNetwork"]["enabled"]:
        refs["centralNetworkRef"] = child_name(cloud, "CentralNetwork")
    children = [_child(mrc, "IdentityService", {**common, **spec["identity"]})]
    region_names = [region["name"] for region in spec["regions"]]
    for index, region in enumerate(spec["regions"]):
        region_spec = {**common, **refs, **copy_of(region), "index": index}
        region_spec.setdefault("availabilityZone", f"az{index + 1}")
        if not region_spec["neutron"].get("networkAttachments") and spec.get("defaultNetworkAttachments"):
            region_spec["neutron"]["networkAttachments"] = list(spec["defaultNetworkAttachments"])
        children.append(_child(mrc, "Region", region_spec, region["name"]))
    gateway_master = spec["apiGateway"].get("masterRegion") or region_names[0]
    if spec["centralNetwork"]["enabled"]:
        section = {k: v for k, v in spec["centralNetwork"].items() if k != "enabled"}
        if spec["apiGateway"]["enabled"]:
            section["xjob"] = {**section.get("xjob", {}), "gatewayMasterRegion": gateway_master}
        children.append(_child(mrc, "CentralNetwork", {**common, **refs, **section}))
    if spec["apiGateway"]["enabled"]:
        section = {k: v for k, v in spec["apiGateway"].items() if k != "enabled"}
        selected = section.get("regionSelector") or region_names
        section["masterRegion"] = gateway_master
        section["regionRefs"] = [child_name(cloud, "Region", name) for name in selected if name in region_names]
        children.append(_child(mrc, "APIGateway", {**common, **refs, **section}))
    ccm = spec["cloudControllerManager"]
    if ccm["enabled"]:
        section = {k: v for k, v in ccm.items() if k != "enabled"}
        selected = section.get("regions") or region_names
        section["regionRefs"] = [child_name(cloud, "Region", name) for name in selected if name in region_names]
        children.append(_child(mrc, "CloudControllerConfig", {**common, **refs, **section}))
    return children


def copy_of(value: Any) -> Any:
    return json.loads(json.dumps(value))


# --- TLS: a cert-manager Certificate for the whole cloud --------------------------------------------------------------

CERT_MANAGER_CRD = "certificates.cert-manager.io"


def cloud_hosts(children: Iterable[Obj]) -> list[str]:
    """Every host name the cloud's endpoints use (public and internal), sorted."""
    urls: list[str] = []
    for child in children:
        kind = child["kind"]
        defaulted = {**child, "spec": model.defaulted_spec(kind, child["spec"])}
        if kind == "IdentityService":
            found = [identity_endpoints(defaulted)]
        elif kind == "Region":
            found = list(region_endpoints(defaulted).values())
        elif kind == "CentralNetwork":
            neutron_urls, admin_url = central_endpoints(defaulted)
            found = [neutron_urls, Endpoints(admin_url, admin_url)]
        elif kind == "APIGateway":
            found = [gateway_endpoints(defaulted)]
        else:
            continue
        urls += [u for e in found for u in (e.public, e.internal)]
    return sorted({host for host in (urlsplit(u).hostname for u in urls) if host})


def certificate(mrc: Obj, hosts: list[str]) -> Obj:
    """``tls.publicCertSecret`` as a cert-manager Certificate from ``tls.issuerRef``."""
    spec = model.defaulted_spec("MultiRegionCloud", mrc.get("spec"))
    tls = spec["tls"]
    issuer = tls["issuerRef"]
    return {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
            "metadata": metadata(mrc, f"{mrc['metadata']['name']}-tls", "certificate"),
            "spec": {"secretName": tls["publicCertSecret"], "dnsNames": hosts,
                     "issuerRef": {"name": issuer["name"], "kind": issuer.get("kind", "Issuer"),
                                   "group": issuer.get("group", "cert-manager.io")},
                     "usages": ["server auth"]}}


