"""One idempotent reconcile per kind: read the world, converge the owned objects, write status.

Each function takes the resource as stored and a :class:`~isthmus.operator.kube_client.Kube`
client, and returns nothing: it ends by writing the complete status (only when
it differs). The kopf wiring (:mod:`isthmus.operator.handlers`) calls them on
every relevant event and on a timer; none of them assumes it ran before.
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from isthmus.operator import MANAGED_BY, apply, fernet, model, objects, upgrade
from isthmus.operator import conditions as cond
from isthmus.operator.conditions import Condition
from isthmus.operator.kube_client import Kube, secret_text

LOG = logging.getLogger(__name__)
Obj = dict[str, Any]

MANAGED_KINDS = ("Secret", "ConfigMap", "Service", "Deployment", "PodDisruptionBudget", "Job", "EndpointRegistration")
CHILD_KINDS = ("IdentityService", "Region", "CentralNetwork", "APIGateway", "CloudControllerConfig")
UMBRELLA_CONDITIONS = {"IdentityService": "IdentityReady", "CentralNetwork": "CentralNetworkReady",
                       "APIGateway": "APIGatewayReady", "CloudControllerConfig": "CloudControllerConfigReady"}


class Stop(Exception):
    """Reconciliation cannot go further now; the conditions say why."""


# --- helpers ---------------------------------------------------------------------------------------------------------

def not_owned(exc: apply.NotOwned) -> Condition:
    return cond.false("ObjectsOwned", "NotOwned", str(exc))


TARGET_NAMESPACES_ENV = "ISTHMUS_OPERATOR_TARGET_NAMESPACES"


def target_namespaces() -> frozenset[str]:
    """The namespaces besides a resource's own that the operator may write to: its
    configuration, ISTHMUS_OPERATOR_TARGET_NAMESPACES (comma-separated; the shipped
    Deployment lists kube-system, the CCM's), and nothing else. A CloudControllerConfig or a
    Region in namespace A can thus never have the operator write into namespace B unless
    whoever installed the operator allowed B (and granted it a Role there)."""
    return frozenset(n.strip() for n in os.environ.get(TARGET_NAMESPACES_ENV, "").split(",") if n.strip())


def outside_allowed(resource: Obj, namespace: str, field: str) -> Condition | None:
    """A False condition when ``namespace`` (from ``field``) is neither the resource's own nor allowed."""
    if namespace == ns(resource) or namespace in target_namespaces():
        return None
    allowed = ", ".join(sorted(target_namespaces())) or "none"
    return cond.false("InputReady", "NamespaceNotAllowed",
                      f"{field}: the operator writes outside {ns(resource)} only to the namespaces of its "
                      f"{TARGET_NAMESPACES_ENV} ({allowed}), not to {namespace}")


def deployed_version(obj: Obj, spec: Obj, conds: list[Condition], extra: dict[str, Any]) -> None:
    """``status.deployedVersion``: ``spec.version`` once every condition is True (its schema
    Jobs for that version done, its Deployments rolled out and Ready); until then the
    previous one. The umbrella moves an upgrade to the next child on it."""
    if conds and all(c.status == cond.TRUE for c in conds):
        extra["deployedVersion"] = spec["version"]
    elif (obj.get("status") or {}).get("deployedVersion"):
        extra["deployedVersion"] = obj["status"]["deployedVersion"]


@asynccontextmanager
async def reporting(kube: Kube, obj: Obj, conds: list[Condition], extra: dict[str, Any],
                    spec: Obj | None = None) -> AsyncIterator[None]:
    """One reconcile's status, written whatever happens inside: ``Stop`` ends the work
    early (what was found so far is the status), an object owned by someone else is a
    condition. With ``spec``, ``status.deployedVersion`` follows the conditions."""
    try:
        yield
    except Stop:
        pass
    except apply.NotOwned as exc:
        conds.append(not_owned(exc))
    finally:
        if spec is not None:
            deployed_version(obj, spec, conds, extra)
        await write_status(kube, obj, conds, extra)


def ns(obj: Obj) -> str:
    return obj["metadata"].get("namespace", "default")


def name(obj: Obj) -> str:
    return obj["metadata"]["name"]


async def write_status(kube: Kube, obj: Obj, desired: list[Condition], extra: dict[str, Any] | None = None) -> Obj:
    """Write the complete status when anything in it changed."""
    status = obj.get("status") or {}
    generation = obj["metadata"].get("generation")
    new: dict[str, Any] = {"observedGeneration": generation,
                           "conditions": cond.merge(status.get("conditions") or [], desired, generation)}
    new.update(extra or {})
    if all(status.get(key) == value for key, value in new.items()):
        return obj
    await kube.patch(obj["kind"], ns(obj), name(obj), {"status": new}, subresource="status")
    obj = {**obj, "status": {**status, **new}}
    return obj


def deployment_ready(dep: Obj | None, replicas: int) -> tuple[bool, str]:
    if dep is None:
        return False, "not created"
    status = dep.get("status") or {}
    generation = dep["metadata"].get("generation")
    if generation is not None and status.get("observedGeneration", generation) < generation:
        return False, "rollout not observed yet"
    ready = status.get("readyReplicas") or 0
    if ready < replicas or (status.get("updatedReplicas", replicas) or 0) < replicas:
        return False, f"{ready}/{replicas} replicas ready"
    return True, f"{ready}/{replicas} replicas ready"


def job_state(job: Obj | None) -> str:
    """done | failed | running"""
    if job is None:
        return "running"
    status = job.get("status") or {}
    for c in status.get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in ("Complete", "SuccessCriteriaMet"):
            return "done"
        if c.get("status") == "True" and c.get("type") == "Failed":
            return "failed"
    if (status.get("succeeded") or 0) >= 1:
        return "done"
    if (status.get("failed") or 0) > (job.get("spec") or {}).get("backoffLimit", 6):
        return "failed"
    return "running"


def job_condition(type_: str, job: Obj | None, what: str) -> Condition:
    state = job_state(job)
    if state == "done":
        return cond.true(type_, message=f"{what} complete")
    if state == "failed":
        return cond.false(type_, "BackoffLimitExceeded", f"{what} failed" + (f" (Job {name(job)})" if job else ""))
    return cond.false(type_, "Running", f"{what} running")


def deployment_condition(type_: str, dep: Obj | None, replicas: int, what: str) -> Condition:
    ok, detail = deployment_ready(dep, replicas)
    return cond.true(type_, message=f"{what}: {detail}") if ok else cond.false(type_, "Waiting", f"{what}: {detail}")


async def credentials(kube: Kube, obj: Obj, spec: Obj, conds: list[Condition]) -> objects.Credentials:
    """The passwords Secret, or Stop with InputReady=False naming it."""
    secret = await kube.get("Secret", ns(obj), spec["secret"]) if spec.get("secret") else None
    if secret is None:
        conds.append(cond.false("InputReady", "SecretNotFound", f"Secret {spec.get('secret')} not found"))
        raise Stop
    try:
        creds = objects.Credentials.from_secret_data(secret_text(secret))
    except KeyError as exc:
        conds.append(cond.false("InputReady", "SecretNotFound", f"Secret {spec['secret']} lacks {exc.args[0]}"))
        raise Stop from exc
    conds.append(cond.true("InputReady", message="inputs present"))
    return creds


async def tls_input(kube: Kube, obj: Obj, spec: Obj, conds: list[Condition]) -> None:
    tls = spec.get("tls") or {}
    if not tls.get("enabled"):
        return
    cert = tls.get("publicCertSecret")
    if not cert or await kube.get("Secret", ns(obj), cert) is None:
        conds.append(cond.false("TLSInputReady", "TLSSecretNotFound", f"TLS Secret {cert} not found"))
        raise Stop
    conds.append(cond.true("TLSInputReady", message="certificate present"))


async def keystone_for(kube: Kube, obj: Obj, spec: Obj, conds: list[Condition]) -> objects.Endpoints:
    """The Keystone a resource uses, or Stop with IdentityReady=False (Waiting)."""
    ids = await kube.get("IdentityService", ns(obj), spec["keystoneRef"])
    if ids is None or not cond.child_ready(ids):
        conds.append(cond.false("IdentityReady", "Waiting", f"Waiting for IdentityService {spec['keystoneRef']}"))
        raise Stop
    conds.append(cond.true("IdentityReady", message=f"IdentityService {spec['keystoneRef']} ready"))
    return objects.identity_endpoints({**ids, "spec": model.defaulted_spec("IdentityService", ids["spec"])})


async def registrations_condition(kube: Kube, obj: Obj, stored: dict[tuple[str, str], Obj]) -> Condition:
    regs = [o for (kind, _), o in stored.items() if kind == "EndpointRegistration"]
    waiting = [name(r) for r in regs if not cond.child_ready(r)]
    if waiting:
        return cond.false("EndpointsRegistered", "Waiting", "registering " + ", ".join(sorted(waiting)))
    return cond.true("EndpointsRegistered", message=f"{len(regs)} services registered")


# --- MultiRegionCloud ------------------------------------------------------------------------------------------------

async def reconcile_cloud(kube: Kube, mrc: Obj) -> None:
    spec = model.defaulted_spec("MultiRegionCloud", mrc.get("spec"))
    errors = model.validate_cloud(spec)
    if errors:
        await write_status(kube, mrc, [cond.false("InputReady", "InvalidSpec", "; ".join(errors))])
        return
    wanted = objects.cloud_children(mrc)
    before = {(c["kind"], name(c)): await kube.get(c["kind"], ns(mrc), name(c)) for c in wanted}
    children, step = upgrade.rollout(wanted, before, spec["version"])
    try:
        stored = await apply.ensure_all(kube, children, before)
    except apply.NotOwned as exc:
        await write_status(kube, mrc, [not_owned(exc)])
        return
    await apply.prune(kube, mrc, CHILD_KINDS, children)
    conds: list[Condition] = []
    regions_status = []
    region_children = []
    extra: dict[str, Any] = {}
    for child in children:
        kind = child["kind"]
        actual = stored[(kind, name(child))]
        if kind == "Region":
            region_children.append((f"Region {child['spec']['name']}", actual))
            endpoints = objects.region_endpoints(child)
            regions_status.append({"name": child["spec"]["name"], "ready": cond.child_ready(actual),
                                   "version": (actual.get("status") or {}).get("deployedVersion") or "",
                                   "endpoints": {t: e.public for t, e in endpoints.items()}})
            continue
        conds.append(cond.mirror(UMBRELLA_CONDITIONS[kind], actual, f"{kind} {name(child)}"))
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
            conds.append(not_owned(exc))
    extra["regions"] = regions_status
    if step is None:
        extra["deployedVersion"] = spec["version"]
    elif (mrc.get("status") or {}).get("deployedVersion"):
        extra["deployedVersion"] = mrc["status"]["deployedVersion"]
    await write_status(kube, mrc, conds, extra)


async def cloud_certificate(kube: Kube, mrc: Obj, children: list[Obj]) -> Condition:
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
        return cond.true("CertificateReady", message=f"Certificate {name(stored)} issued")
    return cond.false("CertificateReady", "Issuing", f"Certificate {name(stored)}: "
                      + (ready.message if ready is not None and ready.message else "waiting for cert-manager"))


def update_condition(step: upgrade.Step | None, stored: dict[tuple[str, str], Obj], target: str) -> Condition:
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


async def delete_cloud(kube: Kube, mrc: Obj) -> bool:
    """Delete the children phase by phase (their own cleanup deregisters them); True when all are gone."""
    for kinds in DELETION_PHASES:
        remaining = []
        for kind in kinds:
            if kind == "EndpointRegistration":  # owned by the children, part of this cloud
                found = await kube.list(kind, ns(mrc), {"app.kubernetes.io/part-of": name(mrc),
                                                        "app.kubernetes.io/managed-by": MANAGED_BY})
            else:
                found = [child for child in await kube.list(kind, ns(mrc), {"app.kubernetes.io/instance": name(mrc)})
                         if apply.owned_by(child, mrc)]
            for child in found:
                if not child["metadata"].get("deletionTimestamp"):
                    await kube.delete(kind, ns(mrc), name(child))
                # Gone at once without a finalizer: then the next phase need not wait for a retry.
                if await kube.get(kind, ns(mrc), name(child)) is not None:
                    remaining.append(child)
        if remaining:
            return False
    return True


# --- IdentityService -------------------------------------------------------------------------------------------------

async def reconcile_identity(kube: Kube, ids: Obj) -> float | None:
    spec = model.defaulted_spec("IdentityService", ids.get("spec"))
    conds: list[Condition] = []
    urls = objects.identity_endpoints({**ids, "spec": spec})
    extra: dict[str, Any] = {"region": spec["regionName"]}
    requeue: float | None = None
    async with reporting(kube, ids, conds, extra, spec):
        if spec.get("external"):
            conds.append(cond.true("InputReady", message="external Keystone"))
            extra["apiEndpoints"] = {"public": urls.public, "internal": urls.internal}
            return None
        creds = await credentials(kube, ids, spec, conds)
        await tls_input(kube, ids, spec, conds)
        desired = objects.identity_objects(ids, creds)
        by = {(o["kind"], name(o)): o for o in desired}
        n = name(ids)
        early = [o for o in desired if o["kind"] in ("Secret", "Service", "PodDisruptionBudget")]
        stored = await apply.ensure_all(kube, early)
        # a budget scaled down to one replica, a schema Job of a previous version
        await apply.prune(kube, ids, ("PodDisruptionBudget", "Job"), desired)
        requeue = await rotate_fernet_keys(kube, stored[("Secret", f"{n}-fernet-keys")], spec, extra)
        conds.append(cond.true("ServiceConfigReady", message="configuration rendered"))
        conds.append(cond.true("CreateServiceReady", message="Services created"))
        db_sync = await apply.ensure(kube, by[("Job", objects.schema_job_name(f"{n}-db-sync", spec))])
        conds.append(job_condition("DBSyncReady", db_sync, "keystone-manage db_sync"))
        if job_state(db_sync) != "done":
            conds.append(cond.unknown("BootstrapReady", "Requested", "waiting for db_sync"))
            conds.append(cond.unknown("DeploymentReady", "Requested", "waiting for bootstrap"))
            raise Stop
        bootstrap = await apply.ensure(kube, by[("Job", f"{n}-bootstrap")])
        conds.append(job_condition("BootstrapReady", bootstrap, "keystone-manage bootstrap"))
        if job_state(bootstrap) != "done":
            conds.append(cond.unknown("DeploymentReady", "Requested", "waiting for bootstrap"))
            raise Stop
        dep = await apply.ensure(kube, by[("Deployment", n)])
        stored[("Deployment", n)] = dep
        conds.append(deployment_condition("DeploymentReady", dep, spec["replicas"], "keystone"))
        extra["readyReplicas"] = (dep.get("status") or {}).get("readyReplicas") or 0
        if conds[-1].status == cond.TRUE:
            extra["apiEndpoints"] = {"public": urls.public, "internal": urls.internal}
    return requeue


async def rotate_fernet_keys(kube: Kube, keys: Obj, spec: Obj, extra: dict[str, Any],
                             now: datetime | None = None) -> float | None:
    """Rotate the fernet key Secret when ``fernetRotationInterval`` has passed since the
    stamp on it (see isthmus.operator.fernet); the seconds until the next rotation.
    Credential keys are not rotated: keystone must re-encrypt every stored credential
    (``credential_migrate``) between two rotations, which is not a key-file change."""
    try:
        policy = fernet.KeyPolicy.of(spec)
        problem = policy.problem()
    except ValueError as exc:
        problem = str(exc)
    if problem:
        # Rotating with too few keys would end valid tokens early: not at all, and say why.
        LOG.warning("%s/%s: %s; keys not rotated", ns(keys), name(keys), problem)
        return None
    interval = policy.interval
    now = now or datetime.now(UTC).replace(microsecond=0)
    stamp = (keys["metadata"].get("annotations") or {}).get(fernet.ROTATED_AT)
    if stamp and not fernet.valid_stamp(stamp):
        LOG.warning("%s/%s: %s=%r is not a time; the clock restarts now", ns(keys), name(keys),
                    fernet.ROTATED_AT, stamp)
        stamp = None
    patch: Obj | None = None
    if not stamp:
        patch = {"metadata": {"annotations": {fernet.ROTATED_AT: now.isoformat()}}}
    elif fernet.due(stamp, interval, now):
        current = secret_text(keys)
        rotated = fernet.rotate(current, fernet.new_key(), max_active=policy.max_active)
        data: dict[str, str | None] = {k: base64.b64encode(v.encode()).decode() for k, v in rotated.items()}
        data.update(apply.removed_keys(current, rotated))  # the dropped secondaries
        # resourceVersion makes the patch conditional: two writers cannot rotate twice.
        patch = {"metadata": {"annotations": {fernet.ROTATED_AT: now.isoformat()},
                              "resourceVersion": keys["metadata"].get("resourceVersion")}, "data": data}
        LOG.info("rotating fernet keys %s/%s: primary is now key %s", ns(keys), name(keys),
                 max(rotated, key=int))
    if patch is not None:
        if patch["metadata"].get("resourceVersion") is None:
            patch["metadata"].pop("resourceVersion", None)
        await kube.patch("Secret", ns(keys), name(keys), patch)
        stamp = now.isoformat()
    extra["fernetKeysRotatedAt"] = stamp
    if interval <= timedelta(0):
        return None
    assert stamp is not None  # read, or set just above
    left = datetime.fromisoformat(stamp) + interval - now
    return max(left.total_seconds(), 1.0)


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


def range_problems(region_spec: Obj, central_spec: Obj) -> list[str]:
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


async def network_attachments(kube: Kube, region: Obj, nads: list[str], conds: list[Condition],
                              selector: dict[str, str]) -> dict[str, list[str]]:
    missing = [nad for nad in nads if await kube.get("NetworkAttachmentDefinition", ns(region), nad) is None]
    if missing:
        conds.append(cond.false("NetworkAttachmentsReady", "NetworkAttachmentNotFound",
                                "NetworkAttachmentDefinition " + ", ".join(missing) + " not found"))
        raise Stop
    import json

    ips: dict[str, list[str]] = {nad: [] for nad in nads}
    for pod in await kube.list("Pod", ns(region), selector):
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


def db_sync_of(deployment: str, spec: Obj) -> str:
    """The schema Job a Region's Deployment waits for: ``<region>-neutron`` ->
    ``<region>-neutron-db-sync-<version>``, ``<region>-nova-api`` -> ``<region>-nova-db-sync-<version>``."""
    return objects.schema_job_name(deployment.removesuffix("-api") + "-db-sync", spec)


async def reconcile_region(kube: Kube, region: Obj) -> None:
    spec = model.defaulted_spec("Region", region.get("spec"))
    conds: list[Condition] = []
    rname, n = spec["name"], name(region)
    urls = objects.region_endpoints(region)
    extra: dict[str, Any] = {"endpoints": {t: e.public for t, e in urls.items()}}
    cross = spec["neutron"]["crossRegion"]["enabled"] and bool(spec.get("centralNetworkRef"))
    async with reporting(kube, region, conds, extra, spec):
        creds = await credentials(kube, region, spec, conds)
        await tls_input(kube, region, spec, conds)
        if cross:
            cnet = await kube.get("CentralNetwork", ns(region), spec["centralNetworkRef"])
            problems = range_problems(spec, model.defaulted_spec("CentralNetwork", (cnet or {}).get("spec")))
            if problems:
                conds.append(cond.false("CrossRegionConfigValid", "RangeMismatch", "; ".join(problems)))
            else:
                conds.append(cond.true("CrossRegionConfigValid", "Valid", "ranges agree with central"))
        keystone = await keystone_for(kube, region, spec, conds)
        desired = objects.region_objects(region, creds, keystone)
        existing = spec.get("existingControlPlane")
        if existing:
            await existing_control_plane(kube, region, existing, creds, keystone, conds, extra)
        # A Deployment whose schema Job has not succeeded waits (neutron, nova-api, cinder-api).
        jobs = {name(o) for o in desired if o["kind"] == "Job"}
        gated = {name(o) for o in desired if o["kind"] == "Deployment" and db_sync_of(name(o), spec) in jobs}
        desired_now = [o for o in desired if o["kind"] != "Deployment" or name(o) not in gated]
        nads = spec["neutron"].get("networkAttachments") or []
        if nads and not existing:
            selector = {"app.kubernetes.io/name": "neutron", "app.kubernetes.io/instance": n}
            extra["networkAttachments"] = await network_attachments(kube, region, nads, conds, selector)
        stored = await apply.ensure_all(kube, desired_now)
        await apply.prune(kube, region, MANAGED_KINDS, desired)
        async def after_db_sync(type_: str, deployment: str, replicas: int, what: str) -> None:
            db_sync = stored[("Job", db_sync_of(deployment, spec))]
            if job_state(db_sync) != "done":
                conds.append(job_condition(type_, db_sync, f"{what} schema"))
                return
            dep = await apply.ensure(kube, next(o for o in desired if o["kind"] == "Deployment"
                                                and name(o) == deployment))
            conds.append(deployment_condition(type_, dep, replicas, what))

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
        conds.append(await registrations_condition(kube, region, stored))
        if cross:
            cnet = await kube.get("CentralNetwork", ns(region), spec["centralNetworkRef"])
            registered = [r for r in ((cnet or {}).get("status") or {}).get("registeredRegions") or []
                          if r.get("region") == rname]
            extra["registeredWithCentral"] = {"registered": bool(registered), "podId": rname if registered else ""}
            if registered:
                conds.append(cond.true("CentralRegistrationReady",
                                       message=f"registered with {spec['centralNetworkRef']}"))
            else:
                conds.append(cond.false("CentralRegistrationReady", "Waiting",
                                        f"waiting for CentralNetwork {spec['centralNetworkRef']} to register it"))


async def existing_control_plane(kube: Kube, region: Obj, existing: Obj, creds: objects.Credentials,
                                 keystone: objects.Endpoints, conds: list[Condition], extra: dict[str, Any]) -> None:
    """RHOSO: patch the local plugin into an OpenStackControlPlane's Neutron and mirror its readiness."""
    where = existing.get("namespace") or ns(region)
    refused = outside_allowed(region, where, "spec.existingControlPlane.namespace")
    if refused is not None:
        conds.append(refused)
        raise Stop
    oscp = await kube.get("OpenStackControlPlane", where, existing["name"])
    if oscp is None:
        conds.append(cond.false("NeutronReady", "ControlPlaneNotFound",
                                f"OpenStackControlPlane {where}/{existing['name']} not found"))
        raise Stop
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


async def delete_region(kube: Kube, region: Obj) -> bool:
    """Deregister first: delete its EndpointRegistrations (their cleanup removes the
    endpoints) and wait for them to go; then remove its pod from the Isthmus registry."""
    regs = [r for r in await kube.list("EndpointRegistration", ns(region), {"app.kubernetes.io/instance": name(region)})
            if apply.owned_by(r, region)]
    for reg in regs:
        if not reg["metadata"].get("deletionTimestamp"):
            await kube.delete("EndpointRegistration", ns(region), name(reg))
    if regs:
        return False
    return await remove_from_registry(kube, region)


def _going(found: Obj | None) -> bool:
    """Whether a resource as read is gone or going."""
    return found is None or bool(found["metadata"].get("deletionTimestamp"))


async def remove_from_registry(kube: Kube, region: Obj) -> bool:
    """A Region removed from a cloud whose central network stays leaves the registry
    (objects.remove_pod_job), once nothing users own lives in it; until then the Region
    stays, its ``RegistryReleased`` condition saying what holds it. Nothing to do when
    it never joined central, or when central (or the whole cloud) is going: the
    registry goes with it."""
    spec = model.defaulted_spec("Region", region.get("spec"))
    if not spec["neutron"]["crossRegion"]["enabled"] or not spec.get("centralNetworkRef"):
        return True
    cnet = await kube.get("CentralNetwork", ns(region), spec["centralNetworkRef"])
    if cnet is None or _going(cnet):
        return True
    cloud = next((ref["name"] for ref in region["metadata"].get("ownerReferences") or []
                  if ref.get("kind") == "MultiRegionCloud"), None)
    if cloud and _going(await kube.get("MultiRegionCloud", ns(region), cloud)):
        return True
    job = await apply.ensure(kube, objects.remove_pod_job(region, cnet))
    if job_state(job) == "done":
        return True
    held = await last_failure(kube, job)
    released = (cond.false("RegistryReleased", "RegionHeld", held) if held else
                cond.unknown("RegistryReleased", "Running", f"Job {name(job)} running"))
    kept = [Condition.from_dict(c) for c in (region.get("status") or {}).get("conditions") or []
            if c.get("type") not in (cond.READY, released.type)]
    await write_status(kube, region, [*kept, released])
    return False


async def last_failure(kube: Kube, job: Obj) -> str:
    """The termination message of the latest failed run of ``job``'s container ("" if none)."""
    newest = ("", "")
    for pod in await kube.list("Pod", ns(job), {"job-name": name(job)}):
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            for state in (status.get("state") or {}, status.get("lastState") or {}):
                ended = state.get("terminated") or {}
                if ended.get("exitCode") and (ended.get("finishedAt") or "") >= newest[0]:
                    newest = (ended.get("finishedAt") or "", (ended.get("message") or "").strip())
    return newest[1]


# --- CentralNetwork --------------------------------------------------------------------------------------------------

async def registrable_regions(kube: Kube, cnet: Obj) -> list[tuple[str, str]]:
    """Regions of this central network whose Neutron is up and whose ranges agree.
    (Not "Ready": a Region's Ready waits for this very registration.) A region once
    registered stays while its Region exists: its Neutron restarting (an upgrade rolling
    it) is not a reason to drop it, which churned the pods Job and flapped its Ready."""
    registered = {r.get("region") for r in (cnet.get("status") or {}).get("registeredRegions") or []}
    out = []
    for region in await kube.list("Region", ns(cnet)):
        spec = model.defaulted_spec("Region", region.get("spec"))
        if region["metadata"].get("deletionTimestamp") or spec.get("centralNetworkRef") != name(cnet):
            continue
        if not spec["neutron"]["crossRegion"]["enabled"]:
            continue
        found = {t: cond.find((region.get("status") or {}).get("conditions") or [], t)
                 for t in ("NeutronReady", "CrossRegionConfigValid")}
        if spec["name"] in registered or all(c is not None and c.status == cond.TRUE for c in found.values()):
            out.append((spec["name"], spec.get("availabilityZone") or f"az{spec['index'] + 1}"))
    return sorted(out)


async def reconcile_central(kube: Kube, cnet: Obj) -> None:
    spec = model.defaulted_spec("CentralNetwork", cnet.get("spec"))
    conds: list[Condition] = []
    neutron_urls, admin_url = objects.central_endpoints(cnet)
    status = cnet.get("status") or {}
    extra: dict[str, Any] = {"endpoint": neutron_urls.public, "adminAPIEndpoint": admin_url}
    n = name(cnet)
    async with reporting(kube, cnet, conds, extra, spec):
        creds = await credentials(kube, cnet, spec, conds)
        await tls_input(kube, cnet, spec, conds)
        keystone = await keystone_for(kube, cnet, spec, conds)
        regions = await registrable_regions(kube, cnet)
        desired = objects.central_objects(cnet, creds, keystone, regions)
        by = {(o["kind"], name(o)): o for o in desired}
        now = [o for o in desired if o["kind"] != "Deployment"]
        stored = await apply.ensure_all(kube, now)
        await apply.prune(kube, cnet, MANAGED_KINDS, desired)
        syncs = [stored[("Job", objects.schema_job_name(f"{n}-{db}-db-sync", spec))] for db in ("isthmus", "neutron")]
        states = {job_state(j) for j in syncs}
        failed = [name(j) for j in syncs if job_state(j) == "failed"]
        conds.append(cond.true("DBSyncReady", message="schemas ready") if states == {"done"} else
                     cond.false("DBSyncReady", "BackoffLimitExceeded", f"schema Job {', '.join(failed)} failed")
                     if failed else cond.false("DBSyncReady", "Running", "schema Jobs running"))
        if states == {"done"}:
            for type_, dep_name, replicas in (("DeploymentReady", f"{n}-neutron", spec["replicas"]),
                                              ("AdminAPIReady", f"{n}-admin-api", spec["adminAPI"]["replicas"]),
                                              ("XJobReady", f"{n}-xjob", spec["xjob"]["replicas"])):
                dep = await apply.ensure(kube, by[("Deployment", dep_name)])
                conds.append(deployment_condition(type_, dep, replicas, dep_name))
        conds.append(await registrations_condition(kube, cnet, stored))
        # Registered = in the list of the newest pods Job that succeeded; a deleted Region drops out.
        pods_jobs = [o for o in now if o["metadata"]["name"].startswith(f"{n}-pods-")]
        previous = {r["region"]: r for r in status.get("registeredRegions") or []}
        current = dict(regions)
        if pods_jobs and job_state(stored[("Job", name(pods_jobs[0]))]) == "done":
            registered = [{"region": r, "availabilityZone": az} for r, az in regions]
        else:
            registered = [r for key, r in sorted(previous.items()) if key in current]
        extra["registeredRegions"] = registered


# --- APIGateway ------------------------------------------------------------------------------------------------------

async def reconcile_gateway(kube: Kube, gw: Obj) -> None:
    spec = model.defaulted_spec("APIGateway", gw.get("spec"))
    conds: list[Condition] = []
    extra: dict[str, Any] = {"endpoint": objects.gateway_endpoints(gw).public}
    async with reporting(kube, gw, conds, extra, spec):
        creds = await credentials(kube, gw, spec, conds)
        await tls_input(kube, gw, spec, conds)
        keystone = await keystone_for(kube, gw, spec, conds)
        regions: list[Any] = []  # the ready Region objects
        waiting: list[Any] = []  # the others, or the names of missing ones
        selected: list[str] = []  # the region names behind the gateway, ready or not
        for ref in spec.get("regionRefs") or []:
            region = await kube.get("Region", ns(gw), ref)
            (regions if region is not None and cond.child_ready(region) else waiting).append(region or ref)
            if region is not None:
                selected.append(region["spec"]["name"])
        backends = objects.gateway_backends(gw, regions)
        if waiting:
            names = [w if isinstance(w, str) else name(w) for w in waiting]
            conds.append(cond.false("BackendsReady", "Waiting", "waiting for Region " + ", ".join(sorted(names))))
        else:
            conds.append(cond.true("BackendsReady", message=f"{len(backends)} regions behind the gateway"))
        if any(isinstance(w, str) for w in waiting):
            # A Region it names and that no read found: not a reason to stop serving that
            # region ([gateway] regions would lose it and the pods roll). Wait as it is.
            raise Stop
        desired = objects.gateway_objects(gw, creds, keystone, backends, selected)
        stored = await apply.ensure_all(kube, desired)
        await apply.prune(kube, gw, MANAGED_KINDS, desired)
        dep = stored[("Deployment", name(gw))]
        conds.append(deployment_condition("DeploymentReady", dep, spec["replicas"], "isthmus-gateway"))
        conds.append(await registrations_condition(kube, gw, stored))
        extra["backends"] = [{"region": b.region, "novaURL": b.nova_url, "cinderURL": b.cinder_url, "az": b.az}
                             for b in backends]
        extra["configHash"] = dep["spec"]["template"]["metadata"]["annotations"][objects.CONFIG_HASH]


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


# --- EndpointRegistration --------------------------------------------------------------------------------------------

def identity_region_of(ids: Obj | None) -> str:
    return model.defaulted_spec("IdentityService", (ids or {}).get("spec"))["regionName"]


async def reconcile_registration(kube: Kube, reg: Obj) -> None:
    spec = reg["spec"]
    conds: list[Condition] = []
    extra: dict[str, Any] = {}
    async with reporting(kube, reg, conds, extra):
        ids = await kube.get("IdentityService", ns(reg), spec["keystoneRef"])
        if ids is None or not cond.child_ready(ids):
            conds.append(cond.false("IdentityReady", "Waiting", f"Waiting for IdentityService {spec['keystoneRef']}"))
            raise Stop
        keystone = objects.identity_endpoints({**ids, "spec": model.defaulted_spec("IdentityService", ids["spec"])})
        desired = objects.registration_job(reg, keystone, identity_region_of(ids))
        job = await apply.ensure(kube, desired)
        await apply.prune(kube, reg, ("Job",), [desired])
        extra["jobName"] = name(desired)
        conds.append(job_condition("Registered", job, f"{spec['serviceType']} endpoints in {spec['region']}"))
        if job_state(job) == "done":
            extra["registered"] = dict(spec["endpoints"])


async def delete_registration(kube: Kube, reg: Obj) -> bool:
    """Remove the endpoints from Keystone (a Job) before the resource goes; nothing to
    do when they were never registered or Keystone is gone."""
    if not (reg.get("status") or {}).get("registered"):
        return True
    ids = await kube.get("IdentityService", ns(reg), reg["spec"]["keystoneRef"])
    if ids is None or ids["metadata"].get("deletionTimestamp"):
        return True
    keystone = objects.identity_endpoints({**ids, "spec": model.defaulted_spec("IdentityService", ids["spec"])})
    job = objects.registration_job(reg, keystone, identity_region_of(ids), delete=True)
    # One Job per registration object (its uid): Jobs are never patched and this one has no
    # owner, so with a fixed name a later registration of the same name (a service disabled,
    # enabled and disabled again) found the first one's completed Job and never deregistered.
    uid = (reg["metadata"].get("uid") or "")[:8]
    job["metadata"]["name"] = f"{name(reg)}-deregister" + (f"-{uid}" if uid else "")
    job["metadata"].pop("ownerReferences", None)  # must outlive the registration it cleans up
    job["metadata"].setdefault("annotations", {})[objects.OWNER_ANNOTATION] = objects.owner_mark(reg)
    stored = await apply.ensure(kube, job)
    return job_state(stored) == "done"


Reconcile = Callable[[Kube, Obj], Awaitable[float | None]]  # seconds until it must run again, or None
RECONCILERS: dict[str, Reconcile] = {
    "MultiRegionCloud": reconcile_cloud,
    "IdentityService": reconcile_identity,
    "Region": reconcile_region,
    "CentralNetwork": reconcile_central,
    "APIGateway": reconcile_gateway,
    "CloudControllerConfig": reconcile_ccm,
    "EndpointRegistration": reconcile_registration,
}
DELETERS = {
    "MultiRegionCloud": delete_cloud,
    "Region": delete_region,
    "CloudControllerConfig": delete_ccm,
    "EndpointRegistration": delete_registration,
}
