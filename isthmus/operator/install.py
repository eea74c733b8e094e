"""The operator's own manifests: least-privilege RBAC and its Deployment.

``isthmus operator manifests`` prints them (``deploy/operator/rbac.yaml`` and
``deployment.yaml`` are its output for the example cloud, checked current by a
test). The rule they follow:

* cluster-wide, only what is not a secret and not a workload: list/watch of
  CustomResourceDefinitions and Namespaces, which kopf's discovery reads;
* in each namespace the operator watches (``--watch-namespace``; kopf runs with
  one ``--namespace`` per entry, so it lists and watches there only), a Role for
  the Isthmus kinds and everything a cloud is made of (Secrets, ConfigMaps,
  Services, Deployments, Jobs), read access to its inputs (Pods, NADs) and the
  OpenStackControlPlanes it joins;
* in each target namespace (``--target-namespace``, the CCM's ``kube-system``),
  Secrets and ConfigMaps only, and the operator is told the same list
  (``ISTHMUS_OPERATOR_TARGET_NAMESPACES``): it refuses, with a condition, any
  other namespace a resource names.

So no rule grants Secrets, Deployments or Jobs in all namespaces, and the
operator never patches an object it does not own (:mod:`isthmus.operator.apply`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from isthmus.operator import GROUP
from isthmus.operator.crds import KINDS
from isthmus.operator.objects import spread_over_nodes

Obj = dict[str, Any]
NAME = "isthmus-operator"
TARGET_ROLE = "isthmus-operator-target"
RBAC = "rbac.authorization.k8s.io"
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "isthmus"}
WRITE = ["get", "list", "watch", "create", "patch", "delete"]
READ = ["get", "list", "watch"]


@dataclass(frozen=True)
class Install:
    """Where the operator runs and what it may touch."""

    namespace: str = "isthmus-system"
    watch_namespaces: Sequence[str] = ("openstack",)
    target_namespaces: Sequence[str] = ("kube-system",)
    image: str = "registry.example.com/isthmus/isthmus:0.1.0"
    replicas: int = 2  # one leads (the Lease), the other waits to take over
    resync_seconds: int = 60

    def problems(self) -> list[str]:
        out = []
        if not self.watch_namespaces:
            out.append("--watch-namespace: at least one namespace (the operator is namespace-scoped)")
        both = set(self.watch_namespaces) & set(self.target_namespaces)
        if both:
            out.append(f"--target-namespace: {', '.join(sorted(both))} is already watched (full access there)")
        return out


def rule(groups: Sequence[str], resources: Sequence[str], verbs: Sequence[str]) -> Obj:
    return {"apiGroups": list(groups), "resources": list(resources), "verbs": list(verbs)}


def cluster_rules() -> list[Obj]:
    return [
        # kopf's discovery: which resources exist, which namespaces match its patterns.
        rule(["apiextensions.k8s.io"], ["customresourcedefinitions"], ["get", "list", "watch"]),
        rule([""], ["namespaces"], ["list", "watch"]),
    ]


def watched_rules() -> list[Obj]:
    plurals = sorted(plural for plural, _, _ in KINDS.values())
    return [
        rule([GROUP], plurals, WRITE),
        rule([GROUP], [f"{p}/status" for p in plurals], ["get", "patch"]),
        rule([""], ["secrets", "configmaps", "services"], WRITE),
        rule(["apps"], ["deployments"], WRITE),
        rule(["policy"], ["poddisruptionbudgets"], WRITE),
        rule(["batch"], ["jobs"], ["get", "list", "watch", "create", "delete"]),  # Jobs are never patched
        rule([""], ["pods"], READ),
        rule(["k8s.cni.cncf.io"], ["network-attachment-definitions"], READ),
        rule(["core.openstack.org"], ["openstackcontrolplanes"], [*READ, "patch"]),
        rule(["cert-manager.io"], ["certificates"], WRITE),  # tls.issuerRef
        rule(["", "events.k8s.io"], ["events"], ["create", "patch"]),  # kopf's events
    ]


def target_rules() -> list[Obj]:
    return [
        rule([""], ["secrets", "configmaps"], WRITE),  # the CCM's cloud.conf and its env
        rule(["core.openstack.org"], ["openstackcontrolplanes"], ["get", "patch"]),
    ]


def _meta(name: str, namespace: str | None = None) -> Obj:
    meta: Obj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(LABELS)
    return meta


def _binding(kind: str, name: str, install: Install, namespace: str | None = None) -> Obj:
    return {"apiVersion": f"{RBAC}/v1", "kind": f"{kind}Binding", "metadata": _meta(name, namespace),
            "roleRef": {"apiGroup": RBAC, "kind": kind, "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": install.namespace}]}


def namespace_access(namespace: str, role: str, rules: list[Obj], install: Install) -> list[Obj]:
    """A Role and its RoleBinding to the operator's service account in ``namespace``."""
    return [{"apiVersion": f"{RBAC}/v1", "kind": "Role", "metadata": _meta(role, namespace), "rules": rules},
            _binding("Role", role, install, namespace)]


def lease_rules() -> list[Obj]:
    """Leader election (isthmus.operator.leader): its one Lease, in its own namespace."""
    return [rule(["coordination.k8s.io"], ["leases"], ["create"]),
            {**rule(["coordination.k8s.io"], ["leases"], ["get", "patch"]), "resourceNames": [NAME]}]


def rbac(install: Install) -> list[Obj]:
    out: list[Obj] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(install.namespace)},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME, install.namespace)},
        {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": _meta(NAME), "rules": cluster_rules()},
        _binding("ClusterRole", NAME, install),
        *namespace_access(install.namespace, f"{NAME}-lease", lease_rules(), install),
    ]
    for namespace in install.watch_namespaces:
        out += namespace_access(namespace, NAME, watched_rules(), install)
    for namespace in install.target_namespaces:
        out += namespace_access(namespace, TARGET_ROLE, target_rules(), install)
    return out


def deployment(install: Install) -> Obj:
    """Two replicas, one acting: the Lease holder (isthmus.operator.leader); kopf runs
    --standalone (its peering pauses operators, it elects none). Spread over nodes, and a
    PodDisruptionBudget (:func:`disruption_budget`) keeps one through a drain."""
    args = [arg for namespace in install.watch_namespaces for arg in ("--namespace", namespace)]
    env = {"ISTHMUS_OPERATOR_RESYNC": str(install.resync_seconds),
           "ISTHMUS_OPERATOR_TARGET_NAMESPACES": ",".join(install.target_namespaces),
           "ISTHMUS_OPERATOR_LEASE": f"{install.namespace}/{NAME}"}
    selector = {"app.kubernetes.io/name": NAME}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(NAME, install.namespace),
        "spec": {
            "replicas": install.replicas,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": dict(LABELS)},
                "spec": {
                    "serviceAccountName": NAME,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "affinity": spread_over_nodes(selector),
                    "containers": [{
                        "name": "operator", "image": install.image,
                        "command": [NAME, *args, "--standalone", "--liveness=http://0.0.0.0:8080/healthz"],
                        "env": [{"name": k, "value": v} for k, v in env.items()] + [
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "ports": [{"name": "health", "containerPort": 8080}],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "health"}, "periodSeconds": 30},
                        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
                        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}},
                    }],
                },
            },
        },
    }


def disruption_budget(install: Install) -> Obj:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": _meta(NAME, install.namespace),
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}}}}


def cloud_access(namespace: str, target_namespaces: Sequence[str], install: Install) -> list[Obj]:
    """What one cloud in ``namespace`` needs granted (``isthmus operator render`` prints it):
    the watched namespace's Role and, for a CCM writing elsewhere, the target Role there."""
    out = namespace_access(namespace, NAME, watched_rules(), install)
    for target in target_namespaces:
        if target != namespace:
            out += namespace_access(target, TARGET_ROLE, target_rules(), install)
    return out


def grants_everywhere(objs: Sequence[Obj], resources: Sequence[str]) -> list[str]:
    """The cluster-wide rules (ClusterRoles) that grant any of ``resources``: for tests and
    for a reviewer's check of any manifest."""
    found = []
    for obj in objs:
        if obj.get("kind") != "ClusterRole":
            continue
        for r in obj.get("rules") or []:
            granted = set(r.get("resources") or [])
            hit = sorted(granted & set(resources)) or (["*"] if "*" in granted else [])
            if hit:
                found.append(f"ClusterRole {obj['metadata']['name']}: {', '.join(hit)}")
    return found
