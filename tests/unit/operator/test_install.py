"""The operator's own manifests and what `isthmus operator render` prints: least privilege
(no cluster-wide grant of Secrets, workloads or Jobs) and valid against the Kubernetes
schemas (kubernetes-validate, strict) and the CRDs' own schemas."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from isthmus.operator import GROUP, crds, install
from isthmus.operator.preview import render_documents
from isthmus.operator.yamlio import dump_all

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy" / "operator"
SENSITIVE = ("secrets", "configmaps", "deployments", "jobs", "pods", "services", "*")
K8S_VERSION = "1.37.0"


def generated_part(path: Path) -> str:
    """The file without its leading comment block (the generated YAML)."""
    lines = path.read_text().splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "".join(lines)


def example_render() -> list[dict[str, Any]]:
    documents = [d for d in yaml.safe_load_all((DEPLOY / "example-cloud.yaml").read_text()) if d]
    return render_documents(documents)


def test_the_shipped_manifests_are_what_the_command_prints() -> None:
    # Regenerate with: isthmus operator manifests --part rbac|deployment (see the files' headers)
    setup = install.Install()
    assert generated_part(DEPLOY / "rbac.yaml") == dump_all(install.rbac(setup))
    assert generated_part(DEPLOY / "deployment.yaml") == dump_all([install.deployment(setup),
                                                                   install.disruption_budget(setup)])


def test_no_cluster_wide_rule_grants_secrets_workloads_or_jobs() -> None:
    shipped = list(yaml.safe_load_all((DEPLOY / "rbac.yaml").read_text()))
    assert install.grants_everywhere(shipped, SENSITIVE) == []
    assert install.grants_everywhere(example_render(), SENSITIVE) == []
    # ... and the check sees such a rule where there is one
    broad = {"kind": "ClusterRole", "metadata": {"name": "too-much"},
             "rules": [install.rule([""], ["secrets", "configmaps"], ["get"])]}
    assert install.grants_everywhere([broad], SENSITIVE) == ["ClusterRole too-much: configmaps, secrets"]


def test_the_roles_cover_what_the_operator_touches_and_where() -> None:
    docs = install.rbac(install.Install(watch_namespaces=("a", "b"), target_namespaces=("kube-system",)))
    roles = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in docs if d["kind"] == "Role"}
    assert set(roles) == {("a", "isthmus-operator"), ("b", "isthmus-operator"),
                          ("kube-system", "isthmus-operator-target"), ("isthmus-system", "isthmus-operator-lease")}
    target = {r for rule in roles["kube-system", "isthmus-operator-target"]["rules"] for r in rule["resources"]}
    assert target == {"secrets", "configmaps", "openstackcontrolplanes"}  # no workloads in kube-system
    watched = {r for rule in roles["a", "isthmus-operator"]["rules"] for r in rule["resources"]}
    assert {plural for plural, _, _ in crds.KINDS.values()} <= watched
    assert {"secrets", "deployments", "jobs", "services", "configmaps"} <= watched
    bindings = [d for d in docs if d["kind"].endswith("Binding")]
    assert all(b["subjects"] == [{"kind": "ServiceAccount", "name": "isthmus-operator",
                                  "namespace": "isthmus-system"}] for b in bindings)
    dep = install.deployment(install.Install(watch_namespaces=("a", "b"), target_namespaces=("kube-system",)))
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:5] == ["isthmus-operator", "--namespace", "a", "--namespace", "b"]
    assert {"name": "ISTHMUS_OPERATOR_TARGET_NAMESPACES", "value": "kube-system"} in container["env"]


def test_install_refuses_no_namespace_and_a_target_that_is_watched() -> None:
    assert install.Install(watch_namespaces=()).problems() == [
        "--watch-namespace: at least one namespace (the operator is namespace-scoped)"]
    assert install.Install(watch_namespaces=("kube-system",)).problems() == [
        "--target-namespace: kube-system is already watched (full access there)"]


def strict(schema: Any) -> Any:
    """A CRD schema as JSON Schema, unknown properties refused (an API server prunes them)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
        if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


@pytest.mark.parametrize("source", ["render", "manifests"])
def test_everything_printed_is_valid_kubernetes_strictly(source: str) -> None:
    docs = example_render() if source == "render" else [*install.rbac(install.Install()),
                                                      install.deployment(install.Install()),
                                                      install.disruption_budget(install.Install())]
    custom = 0
    for doc in copy.deepcopy(docs):
        if doc["apiVersion"].startswith(f"{GROUP}/"):
            _, _, schema = crds.KINDS[doc["kind"]]
            jsonschema.validate(doc["spec"], strict(schema()))
            custom += 1
            continue
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    assert (custom > 0) == (source == "render")  # the children and registrations were checked too
    # the check can fail: a misspelt field is refused
    bad = copy.deepcopy(install.deployment(install.Install()))
    bad["spec"]["replica"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def _owner(kind: str = "CloudControllerConfig", namespace: str = "ns1", name: str = "c", uid: str = "u1") -> dict:
    return {"kind": kind, "apiVersion": f"{GROUP}/v1alpha1", "metadata": {"name": name, "namespace": namespace,
                                                                          "uid": uid}}


def test_owns_by_controller_reference_in_the_namespace_and_by_mark_outside_it() -> None:
    from isthmus.operator import apply, objects

    owner = _owner()
    here: dict[str, Any] = {"kind": "Secret", "metadata": objects.metadata(owner, "s", "ccm")}
    there: dict[str, Any] = {"kind": "Secret",
                             "metadata": objects.metadata(owner, "cloud-config", "ccm", namespace="kube-system")}
    assert "ownerReferences" in here["metadata"] and "ownerReferences" not in there["metadata"]
    assert apply.owns(here, copy.deepcopy(here)) and apply.owns(there, copy.deepcopy(there))
    # someone else's object at the name, a namesake owner's (another uid), another owner's mark
    bare = {"kind": "Secret", "metadata": {"name": "s", "namespace": "ns1"}}
    assert not apply.owns(here, bare) and not apply.owns(there, bare)
    namesake = {"kind": "Secret", "metadata": objects.metadata(_owner(uid="u2"), "s", "ccm")}
    assert not apply.owns(here, namesake)
    other = {"kind": "Secret", "metadata": objects.metadata(_owner(namespace="ns2"), "cloud-config", "ccm",
                                                           namespace="kube-system")}
    assert not apply.owns(there, other)
    # the mark alone, without the managed-by label, is not enough
    forged = copy.deepcopy(there)
    forged["metadata"]["labels"] = {}
    assert not apply.owns(there, forged)


def test_render_requests_the_certificate_from_the_issuer() -> None:
    documents = [d for d in yaml.safe_load_all((DEPLOY / "example-cloud.yaml").read_text()) if d]
    cloud = next(d for d in documents if d["kind"] == "MultiRegionCloud")
    cloud["spec"]["tls"] = {"enabled": True, "publicCertSecret": "cloud-tls", "issuerRef": {"name": "ca"}}
    (cert,) = [d for d in render_documents(documents) if d["kind"] == "Certificate"]
    assert cert["spec"]["secretName"] == "cloud-tls"
    assert "cloud-identity-public.openstack.svc" in cert["spec"]["dnsNames"]
