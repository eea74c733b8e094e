"""CentralNetwork: central Neutron, the Admin API, the job workers, and the registry's pods."""


from __future__ import annotations

import logging
from typing import Any

from isthmus.operator import apply, model, objects
from isthmus.operator import conditions as cond
from isthmus.operator.conditions import Condition
from isthmus.operator.controllers import common
from isthmus.operator.kube_client import Kube

LOG = logging.getLogger(__name__)


# --- CentralNetwork --------------------------------------------------------------------------------------------------

async def registrable_regions(kube: Kube, cnet: common.Obj) -> list[tuple[str, str]]:
    """Regions of this central network whose Neutron is up and whose ranges agree.
    (Not "Ready": a Region's Ready waits for this very registration.) A region once
    registered stays while its Region exists: its Neutron restarting (an upgrade rolling
    it) is not a reason to drop it, which churned the pods Job and flapped its Ready."""
    registered = {r.get("region") for r in (cnet.get("status") or {}).get("registeredRegions") or []}
    out = []
    for region in await kube.list("Region", common.ns(cnet)):
        spec = model.defaulted_spec("Region", region.get("spec"))
        if region["metadata"].get("deletionTimestamp") or spec.get("centralNetworkRef") != common.name(cnet):
            continue
        if not spec["neutron"]["crossRegion"]["enabled"]:
            continue
        found = {t: cond.find((region.get("status") or {}).get("conditions") or [], t)
                 for t in ("NeutronReady", "CrossRegionConfigValid")}
        if spec["name"] in registered or all(c is not None and c.status == cond.TRUE for c in found.values()):
            out.append((spec["name"], spec.get("availabilityZone") or f"az{spec['index'] + 1}"))
    return sorted(out)


async def reconcile_central(kube: Kube, cnet: common.Obj) -> None:
    spec = model.defaulted_spec("CentralNetwork", cnet.get("spec"))
    conds: list[Condition] = []
    neutron_urls, admin_url = objects.central_endpoints(cnet)
    status = cnet.get("status") or {}
    extra: dict[str, Any] = {"endpoint": neutron_urls.public, "adminAPIEndpoint": admin_url}
    n = common.name(cnet)
    async with common.reporting(kube, cnet, conds, extra, spec):
        creds = await common.credentials(kube, cnet, spec, conds)
        await common.tls_input(kube, cnet, spec, conds)
        keystone = await common.keystone_for(kube, cnet, spec, conds)
        regions = await registrable_regions(kube, cnet)
        desired = objects.central_objects(cnet, creds, keystone, regions)
        by = {(o["kind"], common.name(o)): o for o in desired}
        now = [o for o in desired if o["kind"] != "Deployment"]
        stored = await apply.ensure_all(kube, now)
        await apply.prune(kube, cnet, common.MANAGED_KINDS, desired)
        syncs = [stored[("Job", objects.schema_job_name(f"{n}-{db}-db-sync", spec))] for db in ("isthmus", "neutron")]
        states = {common.job_state(j) for j in syncs}
        failed = [common.name(j) for j in syncs if common.job_state(j) == "failed"]
        conds.append(cond.true("DBSyncReady", message="schemas ready") if states == {"done"} else
                     cond.false("DBSyncReady", "BackoffLimitExceeded", f"schema Job {', '.join(failed)} failed")
                     if failed else cond.false("DBSyncReady", "Running", "schema Jobs running"))
        if states == {"done"}:
            for type_, dep_name, replicas in (("DeploymentReady", f"{n}-neutron", spec["replicas"]),
                                              ("AdminAPIReady", f"{n}-admin-api", spec["adminAPI"]["replicas"]),
                                              ("XJobReady", f"{n}-xjob", spec["xjob"]["replicas"])):
                dep = await apply.ensure(kube, by[("Deployment", dep_name)])
                conds.append(common.deployment_condition(type_, dep, replicas, dep_name))
        conds.append(await common.registrations_condition(kube, cnet, stored))
        # Registered = in the list of the newest pods Job that succeeded; a deleted Region drops out.
        pods_jobs = [o for o in now if o["metadata"]["name"].startswith(f"{n}-pods-")]
        previous = {r["region"]: r for r in status.get("registeredRegions") or []}
        current = dict(regions)
        if pods_jobs and common.job_state(stored[("Job", common.name(pods_jobs[0]))]) == "done":
            registered = [{"region": r, "availabilityZone": az} for r, az in regions]
        else:
            registered = [r for key, r in sorted(previous.items()) if key in current]
        extra["registeredRegions"] = registered


