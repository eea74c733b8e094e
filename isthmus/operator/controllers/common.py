"""What every kind's reconcile shares: status writing (``reporting``), conditions of
Deployments and Jobs, the inputs every kind reads (credentials, TLS, Keystone), and the
namespaces the operator may write to."""


from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from isthmus.operator import apply, model, objects
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


