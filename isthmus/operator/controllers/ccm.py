"""CloudControllerConfig: the cloud.conf Secret the CCM reads, in its target namespace."""


from __future__ import annotations

import logging
from typing import Any

from isthmus.operator import apply, model, objects
from isthmus.operator import conditions as cond
from isthmus.operator.conditions import Condition
from isthmus.operator.controllers.common import Obj, Stop, ns, outside_allowed, reporting
from isthmus.operator.kube_client import Kube, secret_text

LOG = logging.getLogger(__name__)


# --- CloudControllerConfig -------------------------------------------------------------------------------------------

async def reconcile_ccm(kube: Kube, ccm: Obj) -> None:
    spec = model.defaulted_spec("CloudControllerConfig", ccm.get("spec"))
    conds: list[Condition] = []
    extra: dict[str, Any] = {}
    async with reporting(kube, ccm, conds, extra):
        ref = spec.get("credentialsSecretRef") or {}
        found = await kube.get("Secret", ns(ccm), ref.get("name", "")) if ref.get("name") else None
        data = secret_text(found) if found else {}
        id_key = ref.get("idKey", "application-credential-id")
        secret_key = ref.get("secretKey", "application-credential-secret")
        if not data.get(id_key) or not data.get(secret_key):
            conds.append(cond.false("InputReady", "SecretNotFound",
                                    f"Secret {ref.get('name')} with {id_key} and {secret_key} not found"))
            raise Stop
        refused = outside_allowed(ccm, spec["target"]["namespace"], "spec.target.namespace")
        if refused is not None:
            conds.append(refused)
            raise Stop
        conds.append(cond.true("InputReady", message="application credential present"))
        ids = await kube.get("IdentityService", ns(ccm), spec["keystoneRef"])
        ids = ids or {"metadata": {"name": spec["keystoneRef"], "namespace": ns(ccm)}, "spec": {}}
        keystone = objects.identity_endpoints({**ids, "spec": model.defaulted_spec("IdentityService", ids["spec"])})
        regions = []
        for ref_name in spec.get("regionRefs") or []:
            region = await kube.get("Region", ns(ccm), ref_name)
            if region is not None:
                regions.append(region["spec"]["name"])
        desired = objects.ccm_objects(ccm, (data[id_key], data[secret_key]), keystone, regions)
        await apply.ensure_all(kube, desired)
        target = spec["target"]
        await apply.prune(kube, ccm, ("Secret", "ConfigMap"), desired, namespace=target["namespace"])
        conds.append(cond.true("Rendered", message=f"cloud.conf for {len(regions)} regions"))
        extra.update({"renderedSecret": f"{target['namespace']}/{target['secretName']}",
                      "renderedHash": objects.rendered_hash(desired[:1]), "regions": regions})


async def delete_ccm(kube: Kube, ccm: Obj) -> bool:
    """The rendered Secret lives in another namespace, out of reach of owner-reference GC."""
    spec = model.defaulted_spec("CloudControllerConfig", ccm.get("spec"))
    if outside_allowed(ccm, spec["target"]["namespace"], "spec.target.namespace") is None:
        await apply.prune(kube, ccm, ("Secret", "ConfigMap"), [], namespace=spec["target"]["namespace"])
    return True  # not allowed there: nothing was ever written there


