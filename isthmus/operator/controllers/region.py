"""Region: one region's control plane (or an existing one's Neutron), its network attachments,
and its removal from the Isthmus registry."""


from __future__ import annotations

import logging
from typing import Any

from isthmus.operator import apply, model, objects
from isthmus.operator import conditions as cond
from isthmus.operator.conditions import Condition
from isthmus.operator.controllers import common
from isthmus.operator.kube_client import Kube

LOG = logging.getLogger(__name__)


# --- Region ----------------------------------------------------------------------------------------------------------

def parse_ranges(ranges: list[str]) -> list[tuple[str, int, int]]:
    """'physnet:min:max' or 'min:max' -> (physnet or '', min, max)."""
    out = []
    for item in ranges:
        parts = item.split(":")
        if len(parts) == 2:
            out.append(("", int(parts[0]), int(parts[1])))
        elif len(parts) == 3:
            out.append((parts[0], int(parts[1]), int(parts[2])))
    return out


def range_problems(region_spec: common.Obj, central_spec: common.Obj) -> list[str]:
    """Isthmus' rules (docs/operator.md): a region's tenant VNIs never overlap central's
    (copies keep central's VNI, which a region's own network must never have taken),
    and every central VLAN range on a physnet the region has lies within the region's."""
    problems = []
    region_vni = parse_ranges(region_spec["neutron"].get("vniRanges") or [objects.vni_range(region_spec["index"])])
    central_vni = parse_ranges(central_spec.get("vniRanges") or ["1:99999"])
    for _, lo, hi in region_vni:
        for _, clo, chi in central_vni:
            if lo <= chi and clo <= hi:
                problems.append(f"VNI range {lo}:{hi} overlaps central's {clo}:{chi}")
    region_vlan = parse_ranges(region_spec["neutron"].get("networkVlanRanges") or ["physnet1:100:2999"])
    for physnet, clo, chi in parse_ranges(central_spec.get("networkVlanRanges") or ["physnet1:100:2999"]):
        mine = [(lo, hi) for p, lo, hi in region_vlan if p == physnet]
        if mine and not any(lo <= clo and chi <= hi for lo, hi in mine):
            problems.append(f"central VLAN range {physnet}:{clo}:{chi} is not within the region's")
    return problems


async def network_attachments(kube: Kube, region: common.Obj, nads: list[str], conds: list[Condition],
                              selector: dict[str, str]) -> dict[str, list[str]]:
    missing = [nad for nad in nads if await kube.get("NetworkAttachmentDefinition", common.ns(region), nad) is None]
    if missing:
        conds.append(cond.false("NetworkAttachmentsReady", "NetworkAttachmentNotFound",
                                "NetworkAttachmentDefinition " + ", ".join(missing) + " not found"))
        raise common.Stop
    import json

    ips: dict[str, list[str]] = {nad: [] for nad in nads}
    for pod in await kube.list("Pod", common.ns(region), selector):
        raw = (pod["metadata"].get("annotations") or {}).get("k8s.v1.cni.cncf.io/network-status", "[]")
        try:
            statuses = json.loads(raw)
        except ValueError:
            continue
        for entry in statuses:
            nad = str(entry.get("name", "")).split("/")[-1]
            if nad in ips:
                ips[nad] += entry.get("ips") or []
    lacking = [nad for nad, addresses in ips.items() if not addresses]
    if lacking:
        conds.append(cond.false("NetworkAttachmentsReady", "Waiting", "no IP yet on " + ", ".join(lacking)))
    else:
        conds.append(cond.true("NetworkAttachmentsReady", message="every pod network has addresses"))
    return {nad: sorted(set(addresses)) for nad, addresses in ips.items()}


def db_sync_of(deployment: str, spec: common.Obj) -> str:
    """The schema Job a Region's Deployment waits for: ``<region>-neutron`` ->
    ``<region>-neutron-db-sync-<version>``, ``<region>-nova-api`` -> ``<region>-nova-db-sync-<version>``."""
    return objects.schema_job_name(deployment.removesuffix("-api") + "-db-sync", spec)


async def reconcile_region(kube: Kube, region: common.Obj) -> None:
    spec = model.defaulted_spec("Region", region.get("spec"))
    conds: list[Condition] = []
    rname, n = spec["name"], common.name(region)
    urls = objects.region_endpoints(region)
    extra: dict[str, Any] = {"endpoints": {t: e.public for t, e in urls.items()}}
    cross = spec["neutron"]["crossRegion"]["enabled"] and bool(spec.get("centralNetworkRef"))
    async with common.reporting(kube, region, conds, extra, spec):
        creds = await common.credentials(kube, region, spec, conds)
        await common.tls_input(kube, region, spec, conds)
        if cross:
            cnet = await kube.get("CentralNetwork", common.ns(region), spec["centralNetworkRef"])
            problems = range_problems(spec, model.defaulted_spec("CentralNetwork", (cnet or {}).get("spec")))
            if problems:
                conds.append(cond.false("CrossRegionConfigValid", "RangeMismatch", "; ".join(problems)))
            else:
                conds.append(cond.true("CrossRegionConfigValid", "Valid", "ranges agree with central"))
        keystone = await common.keystone_for(kube, region, spec, conds)
        desired = objects.region_objects(region, creds, keystone)
        existing = spec.get("existingControlPlane")
        if existing:
            await existing_control_plane(kube, region, existing, creds, keystone, conds, extra)
        # A Deployment whose schema Job has not succeeded waits (neutron, nova-api, cinder-api).
        jobs = {common.name(o) for o in desired if o["kind"] == "Job"}
        gated = {common.name(o) for o in desired
                 if o["kind"] == "Deployment" and db_sync_of(common.name(o), spec) in jobs}
        desired_now = [o for o in desired if o["kind"] != "Deployment" or common.name(o) not in gated]
        nads = spec["neutron"].get("networkAttachments") or []
        if nads and not existing:
            selector = {"app.kubernetes.io/name": "neutron", "app.kubernetes.io/instance": n}
            extra["networkAttachments"] = await network_attachments(kube, region, nads, conds, selector)
        stored = await apply.ensure_all(kube, desired_now)
        await apply.prune(kube, region, common.MANAGED_KINDS, desired)
        async def after_db_sync(type_: str, deployment: str, replicas: int, what: str) -> None:
            db_sync = stored[("Job", db_sync_of(deployment, spec))]
            if common.job_state(db_sync) != "done":
                conds.append(common.job_condition(type_, db_sync, f"{what} schema"))
                return
            dep = await apply.ensure(kube, next(o for o in desired if o["kind"] == "Deployment"
                                                and common.name(o) == deployment))
            conds.append(common.deployment_condition(type_, dep, replicas, what))

        if not existing:
            await after_db_sync("NeutronReady", f"{n}-neutron", spec["neutron"]["replicas"], "neutron")
        for key, type_ in (("nova", "NovaReady"), ("cinder", "CinderReady")):
            section = spec[key]
            if not section["enabled"]:
                continue  # a disabled service has no condition at all
            if section["mode"] == "External":
                conds.append(cond.true(type_, "External", f"{key}: external endpoints"))
            else:
                await after_db_sync(type_, f"{n}-{key}-api", section["replicas"], f"{key}-api")
        conds.append(await common.registrations_condition(kube, region, stored))
        if cross:
            cnet = await kube.get("CentralNetwork", common.ns(region), spec["centralNetworkRef"])
            registered = [r for r in ((cnet or {}).get("status") or {}).get("registeredRegions") or []
                          if r.get("region") == rname]
            extra["registeredWithCentral"] = {"registered": bool(registered), "podId": rname if registered else ""}
            if registered:
                conds.append(cond.true("CentralRegistrationReady",
                                       message=f"registered with {spec['centralNetworkRef']}"))
            else:
                conds.append(cond.false("CentralRegistrationReady", "Waiting",
                                        f"waiting for CentralNetwork {spec['centralNetworkRef']} to register it"))


async def existing_control_plane(kube: Kube, region: common.Obj, existing: common.Obj, creds: objects.Credentials,
                                 keystone: objects.Endpoints, conds: list[Condition], extra: dict[str, Any]) -> None:
    """RHOSO: patch the local plugin into an OpenStackControlPlane's Neutron and mirror its readiness."""
    where = existing.get("namespace") or common.ns(region)
    refused = common.outside_allowed(region, where, "spec.existingControlPlane.namespace")
    if refused is not None:
        conds.append(refused)
        raise common.Stop
    oscp = await kube.get("OpenStackControlPlane", where, existing["name"])
    if oscp is None:
        conds.append(cond.false("NeutronReady", "ControlPlaneNotFound",
                                f"OpenStackControlPlane {where}/{existing['name']} not found"))
        raise common.Stop
    snippet = objects.custom_service_config(region, creds, keystone)
    extra["customServiceConfig"] = snippet
    current = (((oscp.get("spec") or {}).get("neutron") or {}).get("template") or {}).get("customServiceConfig")
    if current != snippet:
        LOG.info("patching OpenStackControlPlane %s/%s: Isthmus local plugin", where, existing["name"])
        await kube.patch("OpenStackControlPlane", where, existing["name"], objects.control_plane_patch(snippet))
        conds.append(cond.false("NeutronReady", "Waiting",
                                "customServiceConfig patched; waiting for the control plane"))
        return
    ready = cond.find((oscp.get("status") or {}).get("conditions") or [], "Ready")
    if ready and ready.status == cond.TRUE and cond.child_ready(oscp):
        conds.append(cond.true("NeutronReady", message=f"OpenStackControlPlane {existing['name']} ready"))
    else:
        conds.append(cond.false("NeutronReady", "Waiting",
                                f"OpenStackControlPlane {existing['name']}: {ready.message if ready else 'not ready'}"))


async def delete_region(kube: Kube, region: common.Obj) -> bool:
    """Deregister first: delete its EndpointRegistrations (their cleanup removes the
    endpoints) and wait for them to go; then remove its pod from the Isthmus registry."""
    instance = {"app.kubernetes.io/instance": common.name(region)}
    regs = [r for r in await kube.list("EndpointRegistration", common.ns(region), instance)
            if apply.owned_by(r, region)]
    for reg in regs:
        if not reg["metadata"].get("deletionTimestamp"):
            await kube.delete("EndpointRegistration", common.ns(region), common.name(reg))
    if regs:
        return False
    return await remove_from_registry(kube, region)


def _going(found: common.Obj | None) -> bool:
    """Whether a resource as read is gone or going."""
    return found is None or bool(found["metadata"].get("deletionTimestamp"))


async def remove_from_registry(kube: Kube, region: common.Obj) -> bool:
    """A Region removed from a cloud whose central network stays leaves the registry
    (objects.remove_pod_job), once nothing users own lives in it; until then the Region
    stays, its ``RegistryReleased`` condition saying what holds it. Nothing to do when
    it never joined central, or when central (or the whole cloud) is going: the
    registry goes with it."""
    spec = model.defaulted_spec("Region", region.get("spec"))
    if not spec["neutron"]["crossRegion"]["enabled"] or not spec.get("centralNetworkRef"):
        return True
    cnet = await kube.get("CentralNetwork", common.ns(region), spec["centralNetworkRef"])
    if cnet is None or _going(cnet):
        return True
    cloud = next((ref["name"] for ref in region["metadata"].get("ownerReferences") or []
                  if ref.get("kind") == "MultiRegionCloud"), None)
    if cloud and _going(await kube.get("MultiRegionCloud", common.ns(region), cloud)):
        return True
    job = await apply.ensure(kube, objects.remove_pod_job(region, cnet))
    if common.job_state(job) == "done":
        return True
    held = await last_failure(kube, job)
    released = (cond.false("RegistryReleased", "RegionHeld", held) if held else
                cond.unknown("RegistryReleased", "Running", f"Job {common.name(job)} running"))
    kept = [Condition.from_dict(c) for c in (region.get("status") or {}).get("conditions") or []
            if c.get("type") not in (cond.READY, released.type)]
    await common.write_status(kube, region, [*kept, released])
    return False


async def last_failure(kube: Kube, job: common.Obj) -> str:
    """The termination message of the latest failed run of ``job``'s container ("" if none)."""
    newest = ("", "")
    for pod in await kube.list("Pod", common.ns(job), {"job-name": common.name(job)}):
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            for state in (status.get("state") or {}, status.get("lastState") or {}):
                ended = state.get("terminated") or {}
                if ended.get("exitCode") and (ended.get("finishedAt") or "") >= newest[0]:
                    newest = (ended.get("finishedAt") or "", (ended.get("message") or "").strip())
    return newest[1]


