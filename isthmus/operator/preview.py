"""``isthmus operator render``: every object of a MultiRegionCloud, without a cluster.

The same functions as the handlers (:mod:`isthmus.operator.objects`), with every
readiness gate open: what the operator converges to once everything is Ready.
Last come the Roles the operator needs for this cloud (its namespace and the
CCM's target namespace; :mod:`isthmus.operator.install`): nothing cluster-wide.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from isthmus.operator import install, model, objects
from isthmus.operator.kube_client import secret_text

Obj = dict[str, Any]


def _find_secret(documents: Iterable[Obj], name: str) -> Obj | None:
    for doc in documents:
        if doc.get("kind") == "Secret" and doc.get("metadata", {}).get("name") == name:
            return doc
    return None


def render_cloud(mrc: Obj, documents: list[Obj]) -> list[Obj]:
    mrc = {**mrc, "metadata": {"namespace": "default", **mrc.get("metadata", {})}}
    spec = model.defaulted_spec("MultiRegionCloud", mrc.get("spec"))
    errors = model.validate_cloud(spec)
    if errors:
        raise ValueError(f"MultiRegionCloud {mrc['metadata'].get('name')}: " + "; ".join(errors))
    found = _find_secret(documents, spec["secret"])
    creds = (objects.Credentials.from_secret_data(secret_text(found)) if found
             else objects.PLACEHOLDER_CREDENTIALS)
    children = objects.cloud_children(mrc)
    by_kind: dict[str, list[Obj]] = {}
    for child in children:
        by_kind.setdefault(child["kind"], []).append(child)
    ids = by_kind["IdentityService"][0]
    keystone = objects.identity_endpoints({**ids, "spec": model.defaulted_spec("IdentityService", ids["spec"])})
    out: list[Obj] = list(children)
    if spec["tls"].get("enabled") and spec["tls"].get("issuerRef"):
        out.append(objects.certificate(mrc, objects.cloud_hosts(children)))
    out += objects.identity_objects(ids, creds)
    regions = by_kind.get("Region", [])
    for region in regions:
        out += objects.region_objects(region, creds, keystone)
    for cnet in by_kind.get("CentralNetwork", []):
        registered = [(r["spec"]["name"], r["spec"]["availabilityZone"]) for r in regions
                      if model.defaulted_spec("Region", r["spec"])["neutron"]["crossRegion"]["enabled"]]
        out += objects.central_objects(cnet, creds, keystone, registered)
    for gw in by_kind.get("APIGateway", []):
        selected = [r for r in regions if r["metadata"]["name"] in gw["spec"]["regionRefs"]]
        out += objects.gateway_objects(gw, creds, keystone, objects.gateway_backends(gw, selected),
                                       [r["spec"]["name"] for r in selected])
    for ccm in by_kind.get("CloudControllerConfig", []):
        ref = ccm["spec"].get("credentialsSecretRef") or {}
        cred_secret = _find_secret(documents, ref.get("name", ""))
        data = secret_text(cred_secret) if cred_secret else {}
        id_key = ref.get("idKey", "application-credential-id")
        secret_key = ref.get("secretKey", "application-credential-secret")
        credential = (data.get(id_key, f"$({id_key})"), data.get(secret_key, f"$({secret_key})"))
        names = [r["spec"]["name"] for r in regions if r["metadata"]["name"] in ccm["spec"]["regionRefs"]]
        out += objects.ccm_objects(ccm, credential, keystone, names)
    targets = [model.defaulted_spec("CloudControllerConfig", c["spec"])["target"]["namespace"]
               for c in by_kind.get("CloudControllerConfig", [])]
    out += install.cloud_access(mrc["metadata"]["namespace"], targets, install.Install())
    return out


def render_documents(documents: list[Obj]) -> list[Obj]:
    clouds = [d for d in documents if d.get("kind") == "MultiRegionCloud"]
    if not clouds:
        raise ValueError("no MultiRegionCloud in the input")
    out: list[Obj] = []
    for mrc in clouds:
        out += render_cloud(mrc, documents)
    return out
