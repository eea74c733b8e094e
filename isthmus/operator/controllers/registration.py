"""EndpointRegistration: a service's endpoints in Keystone, registered and removed by Jobs."""


from __future__ import annotations

import logging
from typing import Any

from isthmus.operator import apply, model, objects
from isthmus.operator import conditions as cond
from isthmus.operator.conditions import Condition
from isthmus.operator.controllers import common
from isthmus.operator.kube_client import Kube

LOG = logging.getLogger(__name__)


# --- EndpointRegistration --------------------------------------------------------------------------------------------

def identity_region_of(ids: common.Obj | None) -> str:
    return model.defaulted_spec("IdentityService", (ids or {}).get("spec"))["regionName"]


async def reconcile_registration(kube: Kube, reg: common.Obj) -> None:
    spec = reg["spec"]
    conds: list[Condition] = []
    extra: dict[str, Any] = {}
    async with common.reporting(kube, reg, conds, extra):
        ids = await kube.get("IdentityService", common.ns(reg), spec["keystoneRef"])
        if ids is None or not cond.child_ready(ids):
            conds.append(cond.false("IdentityReady", "Waiting", f"Waiting for IdentityService {spec['keystoneRef']}"))
            raise common.Stop
        keystone = objects.identity_endpoints({**ids, "spec": model.defaulted_spec("IdentityService", ids["spec"])})
        desired = objects.registration_job(reg, keystone, identity_region_of(ids))
        job = await apply.ensure(kube, desired)
        await apply.prune(kube, reg, ("Job",), [desired])
        extra["jobName"] = common.name(desired)
        conds.append(common.job_condition("Registered", job, f"{spec['serviceType']} endpoints in {spec['region']}"))
        if common.job_state(job) == "done":
            extra["registered"] = dict(spec["endpoints"])


async def delete_registration(kube: Kube, reg: common.Obj) -> bool:
    """Remove the endpoints from Keystone (a Job) before the resource goes; nothing to
    do when they were never registered or Keystone is gone."""
    if not (reg.get("status") or {}).get("registered"):
        return True
    ids = await kube.get("IdentityService", common.ns(reg), reg["spec"]["keystoneRef"])
    if ids is None or ids["metadata"].get("deletionTimestamp"):
        return True
    keystone = objects.identity_endpoints({**ids, "spec": model.defaulted_spec("IdentityService", ids["spec"])})
    job = objects.registration_job(reg, keystone, identity_region_of(ids), delete=True)
    # One Job per registration object (its uid): Jobs are never patched and this one has no
    # owner, so with a fixed name a later registration of the same name (a service disabled,
    # enabled and disabled again) found the first one's completed Job and never deregistered.
    uid = (reg["metadata"].get("uid") or "")[:8]
    job["metadata"]["name"] = f"{common.name(reg)}-deregister" + (f"-{uid}" if uid else "")
    job["metadata"].pop("ownerReferences", None)  # must outlive the registration it cleans up
    job["metadata"].setdefault("annotations", {})[objects.OWNER_ANNOTATION] = objects.owner_mark(reg)
    stored = await apply.ensure(kube, job)
    return common.job_state(stored) == "done"


