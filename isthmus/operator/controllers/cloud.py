"""MultiRegionCloud: its children, their upgrade order, the cloud's certificate, deletion in phases."""


from __future__ import annotations

import logging
from typing import Any

from isthmus.operator import MANAGED_BY, apply, model, objects, upgrade
from isthmus.operator import conditions as cond
from isthmus.operator.conditions import Condition
from isthmus.operator.controllers import common
from isthmus.operator.kube_client import Kube

LOG = logging.getLogger(__name__)


# --- MultiRegionCloud ------------------------------------------------------------------------------------------------

async def reconcile_cloud(kube: Kube, mrc: common.Obj) -> None:
    spec = model.defaulted_spec("MultiRegionCloud", mrc.get("spec"))
    errors = model.validate_cloud(spec)
    if errors:
        await common.write_status(kube, mrc, [cond.false("InputReady", "InvalidSpec", "; ".join(errors))])
        return
    wanted = objects.cloud_children(mrc)
    before = {(c["kind"], common.name(c)): await kube.get(c["kind"], common.ns(mrc), common.name(c)) for c in wanted}
    children, step = upgrade.rollout(wanted, before, spec["version"])
    try:
        stored = await apply.ensure_all(kube, children, before)
    except apply.NotOwned as exc:
        await common.write_status(kube, mrc, [common.not_owned(exc)])
        return
    await apply.prune(kube, mrc, common.CHILD_KINDS, children)
    conds: list[Condition] = []
    regions_status = []
    region_children = []
    extra: dict[str, Any] = {}
    for child in children:
        kind = child["kind"]
        actual = stored[(kind, common.name(child))]
        if kind == "Region":
            region_children.append((f"Region {child['spec']['name']}", actual))
            endpoints = objects.region_endpoints(child)
            regions_status.append({"name": child["spec"]["name"], "ready": cond.child_ready(actual),
                                   "version": (actual.get("status") or {}).get("deployedVersion") or "",
                                   "endpoints": {t: e.public for t, e in endpoints.items()}})
            continue
        conds.append(cond.mirror(common.UMBRELLA_CONDITIONS[kind], actual, f"{kind} {common.name(child)}"))
        if kind == "IdentityService":
            urls = objects.identity_endpoints({**child, "spec": model.defaulted_spec(kind, child["spec"])})
            extra["identity"] = {"endpoints": {"public": urls.public, "internal": urls.internal}}
        elif kind == "CentralNetwork":
            extra["centralNetwork"] = {"endpoint": objects.central_endpoints(child)[0].public}
        elif kind == "APIGateway":
            extra["apiGateway"] = {"endpoint": objects.gateway_endpoints(child).public}
    conds.append(cond.mirror_many("RegionsReady", region_children))
    conds.append(update_condition(step, stored, spec["version"]))
    if spec["tls"].get("enabled") and spec["tls"].get("issuerRef"):
        try:
            conds.append(await cloud_certificate(kube, mrc, children))
        except apply.NotOwned as exc:
            conds.append(common.not_owned(exc))
    extra["regions"] = regions_status
    if step is None:
        extra["deployedVersion"] = spec["version"]
    elif (mrc.get("status") or {}).get("deployedVersion"):
        extra["deployedVersion"] = mrc["status"]["deployedVersion"]
    await common.write_status(kube, mrc, conds, extra)


async def cloud_certificate(kube: Kube, mrc: common.Obj, children: list[common.Obj]) -> Condition:
    """``tls.issuerRef``: the cloud's certificate (``tls.publicCertSecret``) requested from
    cert-manager for every host its endpoints name; the children wait for that Secret
    (TLSInputReady) as for one given by hand. Without cert-manager, an error that says so."""
    if await kube.get("CustomResourceDefinition", None, objects.CERT_MANAGER_CRD) is None:
        secret = model.defaulted_spec("MultiRegionCloud", mrc.get("spec"))["tls"]["publicCertSecret"]
        return cond.false("CertificateReady", "CertManagerMissing",
                          f"spec.tls.issuerRef: cert-manager is not installed (no CRD {objects.CERT_MANAGER_CRD}): "
                          f"install it, or create Secret {secret} yourself and remove issuerRef")
    stored = await apply.ensure(kube, objects.certificate(mrc, objects.cloud_hosts(children)))
    ready = cond.find((stored.get("status") or {}).get("conditions") or [], "Ready")
    if ready is not None and ready.status == cond.TRUE:
        return cond.true("CertificateReady", message=f"Certificate {common.name(stored)} issued")
    return cond.false("CertificateReady", "Issuing", f"Certificate {common.name(stored)}: "
                      + (ready.message if ready is not None and ready.message else "waiting for cert-manager"))


def update_condition(step: upgrade.Step | None, stored: dict[tuple[str, str], common.Obj], target: str) -> Condition:
    """``Updated``: True once every child runs ``target``; else the child the rollout waits
    for, and why when it failed (its error condition, which names the Job)."""
    if step is None:
        return cond.true("Updated", message=f"every resource runs {target}")
    child = stored.get((step.kind, step.name)) or {}
    for raw in (child.get("status") or {}).get("conditions") or []:
        failed = raw.get("status") == cond.FALSE and raw.get("reason") in cond.ERROR_REASONS
        if failed and raw.get("type") != cond.READY:
            return cond.false("Updated", "UpdateFailed", f"{step.kind} {step.name}: {raw.get('message')}; the "
                              f"rollout to {target} stops here (the resources after it keep their version)")
    return cond.false("Updated", "UpdateInProgress",
                      f"{step.kind} {step.name}: rolling out {target} ({step.position} of {step.total})")


# Deletion order of a MultiRegionCloud's resources, one phase at a time. Keystone goes last:
# an EndpointRegistration's cleanup runs its deregistration Job against Keystone, and skips it
# when the IdentityService is gone. (Deleting every child at once let the IdentityService,
# which has no finalizer, vanish first, so no endpoint was ever deregistered.) Regions go
# first: they deregister while central still runs (and drops them from registeredRegions).
# The registrations of central and the gateway (which have no finalizer) are deleted here too
# rather than left to the garbage collector, which may reach them only after Keystone has gone.
DELETION_PHASES = (("Region",), ("CentralNetwork", "APIGateway", "CloudControllerConfig", "EndpointRegistration"),
                   ("IdentityService",))


async def delete_cloud(kube: Kube, mrc: common.Obj) -> bool:
    """Delete the children phase by phase (their own cleanup deregisters them); True when all are gone."""
    for kinds in DELETION_PHASES:
        remaining = []
        for kind in kinds:
            if kind == "EndpointRegistration":  # owned by the children, part of this cloud
                found = await kube.list(kind, common.ns(mrc), {"app.kubernetes.io/part-of": common.name(mrc),
                                                               "app.kubernetes.io/managed-by": MANAGED_BY})
            else:
                instance = {"app.kubernetes.io/instance": common.name(mrc)}
                found = [child for child in await kube.list(kind, common.ns(mrc), instance)
                         if apply.owned_by(child, mrc)]
            for child in found:
                if not child["metadata"].get("deletionTimestamp"):
                    await kube.delete(kind, common.ns(mrc), common.name(child))
                # Gone at once without a finalizer: then the next phase need not wait for a retry.
                if await kube.get(kind, common.ns(mrc), common.name(child)) is not None:
                    remaining.append(child)
        if remaining:
            return False
    return True


