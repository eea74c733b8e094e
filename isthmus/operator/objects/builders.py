"""What every kind's objects are built from: the inputs (credentials, endpoints), metadata and
owner references, and the generic builders (Secret, ConfigMap, Service, Deployment, Job, budgets)."""


from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import url as sa_url

from isthmus.configs import services
from isthmus.configs.ini import ServiceUser
from isthmus.operator import API_VERSION, MANAGED_BY
from isthmus.operator.crds import DEFAULT_VERSION

Obj = dict[str, Any]

DEFAULT_REPOSITORY = "quay.io/isthmus/isthmus"
DEFAULT_IMAGE = f"{DEFAULT_REPOSITORY}:{DEFAULT_VERSION}"
CONFIG_HASH = "isthmus.dev/config-hash"
GENERATED = "isthmus.dev/generated"  # created once, never patched (keys, generated passwords)
CREATE_ONLY = "isthmus.dev/create-only"  # Jobs: their pod template is immutable
NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
REGION_LABEL = "isthmus.dev/region"
# On objects written outside the owner's namespace, where owner references do not
# reach: "Kind/namespace/name" of the resource they belong to (isthmus.operator.apply).
OWNER_ANNOTATION = "isthmus.dev/owner"
TLS_DIR = "/etc/isthmus/tls"
CA_DIR = "/etc/isthmus/ca"  # tls.caBundleSecretName, in every pod: what clients trust

KEYSTONE_PORT = 5000
NEUTRON_PORT = 9696
XJOB_METRICS_PORT = 9105  # isthmus-xjob has no API port; [metrics] port in its xjob.conf
NOVA_PORT = 8774
CINDER_PORT = 8776
GATEWAY_PORT = 19998


# --- inputs --------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Credentials:
    """The values of the cloud's Secret (``spec.secret``)."""

    admin_password: str
    service_password: str
    database_password: str
    transport_url: str = "fake:/"
    # transport-url-<Region>: a region's own broker, when it has one.
    regional_transport_urls: Mapping[str, str] | None = None

    @classmethod
    def from_secret_data(cls, data: Mapping[str, str]) -> Credentials:
        """From a Secret's ``data`` (base64) or ``stringData`` (plain) map, already decoded."""
        missing = [key for key in ("admin-password", "service-password", "database-password") if not data.get(key)]
        if missing:
            raise KeyError(", ".join(missing))
        regional = {key[len("transport-url-"):]: value for key, value in data.items()
                    if key.startswith("transport-url-")}
        return cls(data["admin-password"], data["service-password"], data["database-password"],
                   data.get("transport-url", "fake:/"), regional)

    def transport(self, region: str) -> str:
        return (self.regional_transport_urls or {}).get(region, self.transport_url)


# Printed by `isthmus operator render` when the passwords Secret is not in the input.
PLACEHOLDER_CREDENTIALS = Credentials("$(admin-password)", "$(service-password)", "$(database-password)",
                                      "$(transport-url)", {})


@dataclass(frozen=True)
class Endpoints:
    public: str
    internal: str


# --- metadata helpers ------------------------------------------------------------------------------------------------

def labels(owner: Obj, component: str, region: str | None = None) -> dict[str, str]:
    out = {
        "app.kubernetes.io/name": component,
        "app.kubernetes.io/instance": owner["metadata"]["name"],
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/part-of": part_of(owner),
    }
    if region:
        out[REGION_LABEL] = region
    return out


def part_of(owner: Obj) -> str:
    """The cloud a resource belongs to: the umbrella's name, inherited by every child."""
    meta = owner["metadata"]
    cloud: str = (meta.get("labels") or {}).get("app.kubernetes.io/part-of") or meta["name"]
    return cloud


def owner_reference(owner: Obj) -> dict[str, Any]:
    return {
        "apiVersion": owner.get("apiVersion", API_VERSION),
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"].get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def metadata(owner: Obj, name: str, component: str, region: str | None = None,
             annotations: Mapping[str, str] | None = None, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace or owner["metadata"].get("namespace", "default"),
        "labels": labels(owner, component, region),
    }
    # An owner reference only within the owner's namespace: Kubernetes ignores
    # (and GC mishandles) cross-namespace owners.
    if meta["namespace"] == owner["metadata"].get("namespace", "default"):
        meta["ownerReferences"] = [owner_reference(owner)]
    else:
        annotations = {**(annotations or {}), OWNER_ANNOTATION: owner_mark(owner)}
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def owner_mark(owner: Obj) -> str:
    meta = owner["metadata"]
    return f"{owner['kind']}/{meta.get('namespace', 'default')}/{meta['name']}"


def namespace_of(obj: Obj) -> str:
    namespace: str = obj["metadata"].get("namespace", "default")
    return namespace


def service_user(spec: Mapping[str, Any], keystone: Endpoints, username: str, password: str,
                 region: str) -> ServiceUser:
    """A service user calling Keystone's internal URL, telling clients its public one, and
    trusting ``tls.caBundleSecretName`` (mounted in every pod) when given."""
    return ServiceUser(keystone.internal, username, password, region, keystone.public, ca_file(spec))


def ca_file(spec: Mapping[str, Any]) -> str | None:
    return f"{CA_DIR}/ca.crt" if (spec.get("tls") or {}).get("caBundleSecretName") else None


def served_tls(spec: Mapping[str, Any]) -> services.TLSFiles | None:
    """``[ssl]`` of an Isthmus API (the gateway, the Admin API) when ``tls.enabled``: the
    certificate pod_spec mounts, so the URL registered as https is served as https."""
    tls = spec.get("tls") or {}
    if tls.get("enabled") and tls.get("publicCertSecret"):
        return services.TLSFiles(f"{TLS_DIR}/tls.crt", f"{TLS_DIR}/tls.key")
    return None


def image(spec: Mapping[str, Any], service: str) -> str:
    """The image named in ``images`` (per service, or ``isthmus`` for all), else Isthmus'
    image at the resource's ``version``."""
    named = (spec.get("images") or {}).get(service) or (spec.get("images") or {}).get("isthmus")
    return named or f"{DEFAULT_REPOSITORY}:{spec.get('version') or DEFAULT_VERSION}"


def version_slug(spec: Mapping[str, Any]) -> str:
    """``version`` as a name part (DNS-1123): ``2025.1-rc.1`` -> ``2025-1-rc-1``."""
    slug = re.sub(r"[^a-z0-9]+", "-", str(spec.get("version") or DEFAULT_VERSION).lower()).strip("-")
    return slug[:20].rstrip("-") or "v"


def schema_job_name(base: str, spec: Mapping[str, Any]) -> str:
    """A schema Job per target version (``<base>-<version>``): Jobs are immutable and
    create-only, so a fixed name never ran the migrations of a new image again."""
    return f"{base}-{version_slug(spec)}"


def config_hash(*objects: Obj) -> str:
    """Hash of the data pods read: a change rolls the Deployment (annotation on the pod template)."""
    payload = [{"data": o.get("data"), "stringData": o.get("stringData")} for o in objects]
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def service_url(spec: Mapping[str, Any], service: str, namespace: str, port: int, path: str = "") -> str:
    scheme = "https" if spec.get("tls", {}).get("enabled") else "http"
    return f"{scheme}://{service}.{namespace}.svc:{port}{path}"


def endpoints(spec: Mapping[str, Any], prefix: str, namespace: str, port: int, path: str = "",
              overrides: Mapping[str, Any] | None = None) -> Endpoints:
    """The advertised URLs of a ``<prefix>-public``/``<prefix>-internal`` Service pair."""
    overrides = overrides or {}
    urls = {}
    for interface in ("public", "internal"):
        given = (overrides.get(interface) or {}).get("endpointURL")
        urls[interface] = given or service_url(spec, f"{prefix}-{interface}", namespace, port, path)
    return Endpoints(**urls)


def db_url(spec: Mapping[str, Any], creds: Credentials, database: str, section: Mapping[str, Any] | None = None) -> str:
    """A SQLAlchemy URL built by SQLAlchemy: a password with ``@``, ``/``, ``:`` or ``%``
    is percent-encoded (pasted into a string it broke the URL)."""
    server = (section or {}).get("database") or spec["database"]
    url = sa_url.URL.create("mysql+pymysql", username=database, password=creds.database_password,
                            host=server["host"], port=int(server.get("port", 3306)), database=database,
                            query={"charset": "utf8"})
    return url.render_as_string(hide_password=False)


SERVICE_NAMES = {"identity": "keystone", "network": "neutron", "compute": "nova", "volumev3": "cinderv3",
                 "multiregion": "isthmus"}


def endpoint_registration(owner: Obj, spec: Mapping[str, Any], service_type: str, url: Endpoints,
                          region: str) -> Obj:
    name = f"{owner['metadata']['name']}-{service_type}"
    meta = metadata(owner, name, "endpointregistration", region)
    return {"apiVersion": API_VERSION, "kind": "EndpointRegistration", "metadata": meta, "spec": {
        "secret": spec["secret"], "keystoneRef": spec["keystoneRef"], "serviceType": service_type,
        "serviceName": SERVICE_NAMES[service_type], "region": region,
        "endpoints": {"public": url.public, "internal": url.internal}, "image": image(spec, "isthmus"),
        **({"tls": {"caBundleSecretName": ca}} if (ca := (spec.get("tls") or {}).get("caBundleSecretName")) else {})}}


# --- generic object builders -----------------------------------------------------------------------------------------

def secret(owner: Obj, name: str, component: str, files: Mapping[str, str], region: str | None = None,
           annotations: Mapping[str, str] | None = None, namespace: str | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": metadata(owner, name, component, region, annotations, namespace),
            "stringData": dict(files)}


def configmap(owner: Obj, name: str, component: str, files: Mapping[str, str], region: str | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(owner, name, component, region),
            "data": dict(files)}


def service(owner: Obj, name: str, component: str, port: int, region: str | None = None,
            override: Mapping[str, Any] | None = None) -> Obj:
    override = override or {}
    meta = metadata(owner, name, component, region, override.get("annotations"))
    spec: dict[str, Any] = {
        "type": override.get("type", "ClusterIP"),
        "selector": {"app.kubernetes.io/name": component, "app.kubernetes.io/instance": owner["metadata"]["name"]},
        "ports": [{"name": "api", "port": port, "targetPort": port, "protocol": "TCP"}],
    }
    if override.get("loadBalancerIP"):
        spec["loadBalancerIP"] = override["loadBalancerIP"]
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def service_pair(owner: Obj, prefix: str, component: str, port: int, region: str | None,
                 overrides: Mapping[str, Any] | None) -> list[Obj]:
    overrides = overrides or {}
    return [service(owner, f"{prefix}-{interface}", component, port, region, overrides.get(interface))
            for interface in ("public", "internal")]


@dataclass(frozen=True)
class Pod:
    """What differs between the pods of the operator's Deployments and Jobs."""

    component: str
    image: str
    command: list[str]
    config_secret: str | None = None
    config_dir: str = "/etc/isthmus/config"
    env: tuple[tuple[str, str], ...] = ()
    secret_env: tuple[tuple[str, str, str], ...] = ()  # (variable, secret, key)
    port: int | None = None
    metrics_port: int | None = None  # Prometheus /metrics on a port of its own (scrape annotations)
    extra_volumes: tuple[tuple[str, str, str], ...] = ()  # (volume name, secret, mount path)


def pod_spec(spec: Mapping[str, Any], pod: Pod, restart: str = "Always") -> dict[str, Any]:
    container: dict[str, Any] = {"name": pod.component, "image": pod.image, "command": list(pod.command)}
    # kubelet expands $(VAR) in env values and reduces $$ to $: a literal $ is written $$.
    env: list[dict[str, Any]] = [{"name": key, "value": value.replace("$", "$$")} for key, value in pod.env]
    env += [{"name": var, "valueFrom": {"secretKeyRef": {"name": name, "key": key}}}
            for var, name, key in pod.secret_env]
    if env:
        container["env"] = env
    mounts, volumes = [], []
    if pod.config_secret:
        mounts.append({"name": "config", "mountPath": pod.config_dir, "readOnly": True})
        volumes.append({"name": "config", "secret": {"secretName": pod.config_secret}})
    for volume, secret_name, path in pod.extra_volumes:
        mounts.append({"name": volume, "mountPath": path, "readOnly": True})
        volumes.append({"name": volume, "secret": {"secretName": secret_name}})
    tls = spec.get("tls") or {}
    if tls.get("enabled") and tls.get("publicCertSecret") and pod.port:
        mounts.append({"name": "tls", "mountPath": TLS_DIR, "readOnly": True})
        volumes.append({"name": "tls", "secret": {"secretName": tls["publicCertSecret"]}})
    if tls.get("caBundleSecretName"):
        # Every pod trusts the bundle: the config files' cafile (service_user) and, for the
        # openstack clients of the Jobs, OS_CACERT.
        mounts.append({"name": "ca", "mountPath": CA_DIR, "readOnly": True})
        volumes.append({"name": "ca", "secret": {"secretName": tls["caBundleSecretName"]}})
        env.append({"name": "OS_CACERT", "value": f"{CA_DIR}/ca.crt"})
        container["env"] = env
    if mounts:
        container["volumeMounts"] = mounts
    if pod.port:
        container["ports"] = [{"name": "api", "containerPort": pod.port}]
        container["readinessProbe"] = {"tcpSocket": {"port": pod.port}, "periodSeconds": 10}
    if pod.metrics_port:
        container.setdefault("ports", []).append({"name": "metrics", "containerPort": pod.metrics_port})
    out: dict[str, Any] = {"containers": [container], "restartPolicy": restart}
    if volumes:
        out["volumes"] = volumes
    if spec.get("nodeSelector"):
        out["nodeSelector"] = dict(spec["nodeSelector"])
    return out


def deployment(owner: Obj, name: str, pod: Pod, spec: Mapping[str, Any], replicas: int, hash_of: Iterable[Obj],
               region: str | None = None, networks: list[str] | None = None) -> Obj:
    meta = metadata(owner, name, pod.component, region)
    selector = {"app.kubernetes.io/name": pod.component, "app.kubernetes.io/instance": owner["metadata"]["name"]}
    annotations = {CONFIG_HASH: config_hash(*hash_of)}
    if pod.metrics_port:
        annotations.update({"prometheus.io/scrape": "true", "prometheus.io/port": str(pod.metrics_port),
                            "prometheus.io/path": "/metrics"})
    if networks:
        annotations[NETWORKS_ANNOTATION] = json.dumps(
            [{"name": nad, "namespace": meta["namespace"]} for nad in networks], separators=(",", ":"))
    template_spec = pod_spec(spec, pod)
    template_spec["affinity"] = spread_over_nodes(selector)
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": dict(meta["labels"]), "annotations": annotations},
                         "spec": template_spec},
        },
    }


def spread_over_nodes(selector: Mapping[str, str]) -> dict[str, Any]:
    """Replicas on different nodes where the scheduler can: one node's loss or drain takes
    one replica, not all (a preference, so a one-node cluster still schedules)."""
    return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": dict(selector)},
                                            "topologyKey": "kubernetes.io/hostname"}}]}}


def disruption_budgets(owner: Obj, objs: Iterable[Obj]) -> list[Obj]:
    """A PodDisruptionBudget (one pod down at a time) for each Deployment of ``objs`` that
    runs more than one replica: a node drain never takes a whole API down."""
    out = []
    for dep in objs:
        if dep["kind"] != "Deployment" or (dep["spec"].get("replicas") or 0) < 2:
            continue
        meta = dep["metadata"]
        labels = meta["labels"]
        pdb_meta = metadata(owner, meta["name"], labels["app.kubernetes.io/name"], labels.get(REGION_LABEL))
        selector = {"matchLabels": dict(dep["spec"]["selector"]["matchLabels"])}
        out.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": pdb_meta,
                    "spec": {"maxUnavailable": 1, "selector": selector}})
    return out


def job(owner: Obj, name: str, pod: Pod, spec: Mapping[str, Any], hash_of: Iterable[Obj] = (),
        region: str | None = None) -> Obj:
    meta = metadata(owner, name, pod.component, region, {CREATE_ONLY: "true"})
    template_meta = {"labels": dict(meta["labels"]), "annotations": {CONFIG_HASH: config_hash(*hash_of)}}
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
        "spec": {"backoffLimit": 6, "template": {"metadata": template_meta,
                                                  "spec": pod_spec(spec, pod, restart="OnFailure")}},
    }


def gunicorn(app: str, port: int, spec: Mapping[str, Any]) -> list[str]:
    command = ["gunicorn", "--bind", f"0.0.0.0:{port}", "--workers", "2", "--worker-class", "gthread",
               "--threads", "8", "--access-logfile", "-", "--error-logfile", "-"]
    if (spec.get("tls") or {}).get("enabled"):
        command += ["--certfile", f"{TLS_DIR}/tls.crt", "--keyfile", f"{TLS_DIR}/tls.key"]
    return command + [app]


