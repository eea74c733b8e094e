"""IdentityService: Keystone, its schema and bootstrap Jobs, fernet key rotation."""


from __future__ import annotations

import base64
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from isthmus.operator import apply, fernet, model, objects
from isthmus.operator import conditions as cond
from isthmus.operator.conditions import Condition
from isthmus.operator.controllers import common
from isthmus.operator.kube_client import Kube, secret_text

LOG = logging.getLogger(__name__)


# --- IdentityService -------------------------------------------------------------------------------------------------

async def reconcile_identity(kube: Kube, ids: common.Obj) -> float | None:
    spec = model.defaulted_spec("IdentityService", ids.get("spec"))
    conds: list[Condition] = []
    urls = objects.identity_endpoints({**ids, "spec": spec})
    extra: dict[str, Any] = {"region": spec["regionName"]}
    requeue: float | None = None
    async with common.reporting(kube, ids, conds, extra, spec):
        if spec.get("external"):
            conds.append(cond.true("InputReady", message="external Keystone"))
            extra["apiEndpoints"] = {"public": urls.public, "internal": urls.internal}
            return None
        creds = await common.credentials(kube, ids, spec, conds)
        await common.tls_input(kube, ids, spec, conds)
        desired = objects.identity_objects(ids, creds)
        by = {(o["kind"], common.name(o)): o for o in desired}
        n = common.name(ids)
        early = [o for o in desired if o["kind"] in ("Secret", "Service", "PodDisruptionBudget")]
        stored = await apply.ensure_all(kube, early)
        # a budget scaled down to one replica, a schema Job of a previous version
        await apply.prune(kube, ids, ("PodDisruptionBudget", "Job"), desired)
        requeue = await rotate_fernet_keys(kube, stored[("Secret", f"{n}-fernet-keys")], spec, extra)
        conds.append(cond.true("ServiceConfigReady", message="configuration rendered"))
        conds.append(cond.true("CreateServiceReady", message="Services created"))
        db_sync = await apply.ensure(kube, by[("Job", objects.schema_job_name(f"{n}-db-sync", spec))])
        conds.append(common.job_condition("DBSyncReady", db_sync, "keystone-manage db_sync"))
        if common.job_state(db_sync) != "done":
            conds.append(cond.unknown("BootstrapReady", "Requested", "waiting for db_sync"))
            conds.append(cond.unknown("DeploymentReady", "Requested", "waiting for bootstrap"))
            raise common.Stop
        bootstrap = await apply.ensure(kube, by[("Job", f"{n}-bootstrap")])
        conds.append(common.job_condition("BootstrapReady", bootstrap, "keystone-manage bootstrap"))
        if common.job_state(bootstrap) != "done":
            conds.append(cond.unknown("DeploymentReady", "Requested", "waiting for bootstrap"))
            raise common.Stop
        dep = await apply.ensure(kube, by[("Deployment", n)])
        stored[("Deployment", n)] = dep
        conds.append(common.deployment_condition("DeploymentReady", dep, spec["replicas"], "keystone"))
        extra["readyReplicas"] = (dep.get("status") or {}).get("readyReplicas") or 0
        if conds[-1].status == cond.TRUE:
            extra["apiEndpoints"] = {"public": urls.public, "internal": urls.internal}
    return requeue


async def rotate_fernet_keys(kube: Kube, keys: common.Obj, spec: common.Obj, extra: dict[str, Any],
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
        LOG.warning("%s/%s: %s; keys not rotated", common.ns(keys), common.name(keys), problem)
        return None
    interval = policy.interval
    now = now or datetime.now(UTC).replace(microsecond=0)
    stamp = (keys["metadata"].get("annotations") or {}).get(fernet.ROTATED_AT)
    if stamp and not fernet.valid_stamp(stamp):
        LOG.warning("%s/%s: %s=%r is not a time; the clock restarts now", common.ns(keys), common.name(keys),
                    fernet.ROTATED_AT, stamp)
        stamp = None
    patch: common.Obj | None = None
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
        LOG.info("rotating fernet keys %s/%s: primary is now key %s", common.ns(keys), common.name(keys),
                 max(rotated, key=int))
    if patch is not None:
        if patch["metadata"].get("resourceVersion") is None:
            patch["metadata"].pop("resourceVersion", None)
        await kube.patch("Secret", common.ns(keys), common.name(keys), patch)
        stamp = now.isoformat()
    extra["fernetKeysRotatedAt"] = stamp
    if interval <= timedelta(0):
        return None
    assert stamp is not None  # read, or set just above
    left = datetime.fromisoformat(stamp) + interval - now
    return max(left.total_seconds(), 1.0)


