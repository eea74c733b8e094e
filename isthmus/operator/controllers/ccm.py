"""CloudControllerConfig: the cloud.conf Secret the CCM reads, in its target namespace."""


from __future__ import annotations

import logging
from typing import Any

from isthmus.operator import apply, model, objects
from isthmus.operator import conditions as cond
from isthmus.operator.conditions import Condition
from isthmus.operator.controllers import common
from isthmus.operator.kube_client import Kube, secret_text

LOG = logging.getLogger(__name__)


# --- CloudControllerConfig -------------------------------------------------------------------------------------------

async def reconcile_ccm(kube: Kube, ccm: common.Obj) -> None:
    spec = model.defaulted_spec("CloudControllerConfig", ccm.get("spec"))
    conds: list[Condition] = []
    extra: dict[str, Any] = {}
    async with common.reporting(kube, ccm, conds, extra):
        ref = spec.get("credentialsSecretRef") or {}
        found = await kube.get("Secret", common.ns(ccm), ref.get("name", "")) if ref.get("name") else None
        data = secret_text(found) if found else {}
        id_key = ref.get("idKey", "application-credential-id")
        secret_key = ref.get("secretKey", "application-credential-secret")
        if not data.get(id_key) or not data.get(secret_key):
            conds.append(cond.false("InputReady", "SecretNotFound",
                                    f"Secret {ref.get('name')} with {id_key} and {secret_key} not found"))
            raise common.Stop
        refused = common.outside_allowed(ccm, spec["target"]["namespace"], "spec.target.namespace")
        if refused is not None:
            conds.append(refused)
            raise common.Stop
        conds.append(cond.true("InputReady", message="application credential present"))
        ids = await kube.get("IdentityService", common.ns(ccm), spec["keystoneRef"])
        ids = ids or {"metadata": {"name": spec["keystoneRef"], "namespace": common.ns(ccm)}, "spec": {}}
        keystone = objects.identity_endpoints({**ids, "spec": model.defaulted_spec("IdentityService", ids["spec"])})
        regions = []
        for ref_name in spec.get("regionRefs") or []:
            region = await kube.get("Region", common.ns(ccm), ref_name)
            if region is not None:
                regions.append(region["spec"]["name"])
        desired = objects.ccm_objects(ccm, (data[id_key], data[secret_key]), keystone, regions)
        await apply.ensure_all(kube, desired)
        target = spec["target"]
        await apply.prune(kube, ccm, ("Secret", "ConfigMap"), desired, namespace=target["namespace"])
        conds.append(cond.true("Rendered", message=f"cloud.conf for {len(regions)} regions"))
        extra.update({"renderedSecret": f"{target['namespace']}/{target['secretName']}",
                      "renderedHash": objects.rendered_hash(desired[:1]), "regions": regions})


async def delete_ccm(kube: Kube, ccm: common.Obj) -> bool:
    """The rendered Secret lives in another namespace, out of reach of owner-reference GC."""
    spec = model.defaulted_spec("CloudControllerConfig", ccm.get("spec"))
    if common.outside_allowed(ccm, spec["target"]["namespace"], "spec.target.namespace") is None:
        await apply.prune(kube, ccm, ("Secret", "ConfigMap"), [], namespace=spec["target"]["namespace"])
    return True  # not allowed there: nothing was ever written there


