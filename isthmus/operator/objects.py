"""Pure functions: a custom resource -> the Kubernetes objects the operator keeps for it.

Used by the kopf handlers (which create or patch exactly these objects) and by
``isthmus operator render`` (which prints them). Nothing here talks to a
cluster; cross-resource inputs (the passwords Secret, the Keystone a Region
uses) come in as arguments. Configuration files come from :mod:`isthmus.configs`,
the renderer the sandbox uses too.

Naming follows the reference design: children of MultiRegionCloud ``m`` are
``m-identity``, ``m-region-<name lowercased>``, ``m-central-network``,
``m-api-gateway``, ``m-ccm``; each child's objects are prefixed by its name.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets as _secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy.engine import url as sa_url

from isthmus.configs import cloudconf, compute, ini, neutron, services
from isthmus.configs.ini import ISTHMUS_USER, ServiceUser
from isthmus.operator import API_VERSION, MANAGED_BY, fernet, model
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


# --- MultiRegionCloud: the child resources ---------------------------------------------------------------------------

CHILD_SUFFIX = {"IdentityService": "identity", "CentralNetwork": "central-network", "APIGateway": "api-gateway",
                "CloudControllerConfig": "ccm"}
COMMON_KEYS = ("version", "secret", "images", "nodeSelector", "tls", "database")


def child_name(cloud: str, kind: str, region: str | None = None) -> str:
    if kind == "Region":
        return f"{cloud}-region-{(region or '').lower()}"
    return f"{cloud}-{CHILD_SUFFIX[kind]}"


def _child(mrc: Obj, kind: str, spec: dict[str, Any], region: str | None = None) -> Obj:
    name = child_name(mrc["metadata"]["name"], kind, region)
    meta = metadata(mrc, name, kind.lower(), region)
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


def cloud_children(mrc: Obj) -> list[Obj]:
    """The child resources of a MultiRegionCloud (only the enabled ones)."""
    spec = model.defaulted_spec("MultiRegionCloud", mrc.get("spec"))
    cloud = mrc["metadata"]["name"]
    common = {key: spec[key] for key in COMMON_KEYS if key in spec}
    identity_name = child_name(cloud, "IdentityService")
    refs = {"keystoneRef": identity_name, "centralRegionName": spec["centralNetwork"]["regionName"],
            "identityRegionName": spec["identity"]["regionName"]}
    if spec["centralNetwork"]["enabled"]:
        refs["centralNetworkRef"] = child_name(cloud, "CentralNetwork")
    children = [_child(mrc, "IdentityService", {**common, **spec["identity"]})]
    region_names = [region["name"] for region in spec["regions"]]
    for index, region in enumerate(spec["regions"]):
        region_spec = {**common, **refs, **copy_of(region), "index": index}
        region_spec.setdefault("availabilityZone", f"az{index + 1}")
        if not region_spec["neutron"].get("networkAttachments") and spec.get("defaultNetworkAttachments"):
            region_spec["neutron"]["networkAttachments"] = list(spec["defaultNetworkAttachments"])
        children.append(_child(mrc, "Region", region_spec, region["name"]))
    gateway_master = spec["apiGateway"].get("masterRegion") or region_names[0]
    if spec["centralNetwork"]["enabled"]:
        section = {k: v for k, v in spec["centralNetwork"].items() if k != "enabled"}
        if spec["apiGateway"]["enabled"]:
            section["xjob"] = {**section.get("xjob", {}), "gatewayMasterRegion": gateway_master}
        children.append(_child(mrc, "CentralNetwork", {**common, **refs, **section}))
    if spec["apiGateway"]["enabled"]:
        section = {k: v for k, v in spec["apiGateway"].items() if k != "enabled"}
        selected = section.get("regionSelector") or region_names
        section["masterRegion"] = gateway_master
        section["regionRefs"] = [child_name(cloud, "Region", name) for name in selected if name in region_names]
        children.append(_child(mrc, "APIGateway", {**common, **refs, **section}))
    ccm = spec["cloudControllerManager"]
    if ccm["enabled"]:
        section = {k: v for k, v in ccm.items() if k != "enabled"}
        selected = section.get("regions") or region_names
        section["regionRefs"] = [child_name(cloud, "Region", name) for name in selected if name in region_names]
        children.append(_child(mrc, "CloudControllerConfig", {**common, **refs, **section}))
    return children


def copy_of(value: Any) -> Any:
    return json.loads(json.dumps(value))


# --- TLS: a cert-manager Certificate for the whole cloud --------------------------------------------------------------

CERT_MANAGER_CRD = "certificates.cert-manager.io"


def cloud_hosts(children: Iterable[Obj]) -> list[str]:
    """Every host name the cloud's endpoints use (public and internal), sorted."""
    urls: list[str] = []
    for child in children:
        kind = child["kind"]
        defaulted = {**child, "spec": model.defaulted_spec(kind, child["spec"])}
        if kind == "IdentityService":
            found = [identity_endpoints(defaulted)]
        elif kind == "Region":
            found = list(region_endpoints(defaulted).values())
        elif kind == "CentralNetwork":
            neutron_urls, admin_url = central_endpoints(defaulted)
            found = [neutron_urls, Endpoints(admin_url, admin_url)]
        elif kind == "APIGateway":
            found = [gateway_endpoints(defaulted)]
        else:
            continue
        urls += [u for e in found for u in (e.public, e.internal)]
    return sorted({host for host in (urlsplit(u).hostname for u in urls) if host})


def certificate(mrc: Obj, hosts: list[str]) -> Obj:
    """``tls.publicCertSecret`` as a cert-manager Certificate from ``tls.issuerRef``."""
    spec = model.defaulted_spec("MultiRegionCloud", mrc.get("spec"))
    tls = spec["tls"]
    issuer = tls["issuerRef"]
    return {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
            "metadata": metadata(mrc, f"{mrc['metadata']['name']}-tls", "certificate"),
            "spec": {"secretName": tls["publicCertSecret"], "dnsNames": hosts,
                     "issuerRef": {"name": issuer["name"], "kind": issuer.get("kind", "Issuer"),
                                   "group": issuer.get("group", "cert-manager.io")},
                     "usages": ["server auth"]}}


# --- IdentityService -------------------------------------------------------------------------------------------------

def identity_endpoints(ids: Obj) -> Endpoints:
    spec = ids["spec"]
    if spec.get("external"):
        return Endpoints(spec["external"]["publicURL"], spec["external"]["internalURL"])
    return endpoints(spec, ids["metadata"]["name"], namespace_of(ids), KEYSTONE_PORT, "/v3", spec.get("service"))


def fernet_keys() -> dict[str, str]:
    """Two fernet keys: 0 (staged) and 1 (primary), as keystone-manage fernet_setup makes them."""
    return {str(i): base64.urlsafe_b64encode(_secrets.token_bytes(32)).decode() for i in range(2)}


def identity_objects(ids: Obj, creds: Credentials) -> list[Obj]:
    spec = model.defaulted_spec("IdentityService", ids.get("spec"))
    name, comp = ids["metadata"]["name"], "keystone"
    if spec.get("external"):
        return []  # an existing Keystone: nothing to deploy
    keys = fernet.KeyPolicy.of(spec)  # the CRD's patterns made its durations parseable
    values = services.KeystoneValues(
        database_connection=db_url(spec, creds, "keystone", spec),
        fernet_key_repository="/etc/keystone/fernet-keys",
        credential_key_repository="/etc/keystone/credential-keys",
        token_expiration=int(keys.token_expiration.total_seconds()),
        allow_expired_window=int(keys.allow_expired_window.total_seconds()),
        max_active_keys=min(keys.max_active, fernet.MAX_KEYS),
        memcache_servers=tuple(spec.get("memcachedServers") or ()))
    config = secret(ids, f"{name}-config", comp,
                    {"keystone.conf": ini.render(ini.prune(services.keystone_conf(values)))})
    fernet_secret = secret(ids, f"{name}-fernet-keys", comp, fernet_keys(), annotations={GENERATED: "true"})
    credential = secret(ids, f"{name}-credential-keys", comp, fernet_keys(), annotations={GENERATED: "true"})
    urls = identity_endpoints({**ids, "spec": spec})
    base = Pod(comp, image(spec, "keystone"), [], config_secret=f"{name}-config", config_dir="/etc/keystone/conf",
               env=(("OS_KEYSTONE_CONFIG_FILES", "/etc/keystone/conf/keystone.conf"),),
               extra_volumes=(("fernet-keys", f"{name}-fernet-keys", "/etc/keystone/fernet-keys"),
                              ("credential-keys", f"{name}-credential-keys", "/etc/keystone/credential-keys")))
    manage = ["keystone-manage", "--config-file", "/etc/keystone/conf/keystone.conf"]
    db_sync = job(ids, schema_job_name(f"{name}-db-sync", spec), _replace(base, command=[*manage, "db_sync"]), spec,
                  [config])
    bootstrap = job(ids, f"{name}-bootstrap", _replace(
        base, command=["sh", "-c", " ".join(manage) + ' bootstrap --bootstrap-password "$OS_BOOTSTRAP_PASSWORD"'
                       ' --bootstrap-region-id "$OS_BOOTSTRAP_REGION_ID"'
                       ' --bootstrap-public-url "$OS_BOOTSTRAP_PUBLIC_URL"'
                       ' --bootstrap-internal-url "$OS_BOOTSTRAP_INTERNAL_URL"'],
        env=base.env + (("OS_BOOTSTRAP_REGION_ID", spec["regionName"]), ("OS_BOOTSTRAP_PUBLIC_URL", urls.public),
                        ("OS_BOOTSTRAP_INTERNAL_URL", urls.internal)),
        secret_env=(("OS_BOOTSTRAP_PASSWORD", spec["secret"], "admin-password"),)), spec, [config])
    api = deployment(ids, name, _replace(base, command=gunicorn("keystone.wsgi.api:application", KEYSTONE_PORT, spec),
                                         port=KEYSTONE_PORT), spec, spec["replicas"], [config])
    return [config, fernet_secret, credential, db_sync, bootstrap, api,
            *service_pair(ids, name, comp, KEYSTONE_PORT, None, spec.get("service")),
            *disruption_budgets(ids, [api])]


def _replace(pod: Pod, **changes: Any) -> Pod:
    from dataclasses import replace

    return replace(pod, **changes)


# --- Region ----------------------------------------------------------------------------------------------------------

def region_endpoints(region: Obj) -> dict[str, Endpoints]:
    """Service type -> URLs of a region's APIs (the ones it serves or registers)."""
    spec = model.defaulted_spec("Region", region.get("spec"))
    name, ns = region["metadata"]["name"], namespace_of(region)
    out: dict[str, Endpoints] = {}
    existing = spec.get("existingControlPlane")
    if existing:
        given = existing.get("neutronURL") or {}
        where = existing.get("namespace") or ns
        out["network"] = Endpoints(given.get("public") or f"http://neutron-public.{where}.svc:{NEUTRON_PORT}",
                                   given.get("internal") or f"http://neutron-internal.{where}.svc:{NEUTRON_PORT}")
    else:
        out["network"] = endpoints(spec, f"{name}-neutron", ns, NEUTRON_PORT, overrides=spec.get("service"))
    for service_type, key, port, path in (("compute", "nova", NOVA_PORT, "/v2.1"),
                                          ("volumev3", "cinder", CINDER_PORT, "/v3")):
        section = spec[key]
        if not section["enabled"]:
            continue
        if section["mode"] == "External":
            urls = section["externalEndpoints"]
            out[service_type] = Endpoints(urls["public"], urls["internal"])
        else:
            out[service_type] = endpoints(spec, f"{name}-{key}", ns, port, path, spec.get("service"))
    return out


def vni_range(index: int) -> str:
    """As the sandbox: central 1:99999, region i (1-based) 100000*i:100000*i+99999."""
    start = 100000 * (index + 1)
    return f"{start}:{start + 99999}"


def region_neutron_values(region: Obj, creds: Credentials, keystone: Endpoints) -> neutron.NeutronValues:
    spec = model.defaulted_spec("Region", region.get("spec"))
    name = spec["name"]
    n = spec["neutron"]
    user = service_user(spec, keystone, "neutron", creds.service_password, name)
    cross = n["crossRegion"]["enabled"]
    return neutron.NeutronValues(
        role=neutron.LOCAL if cross else neutron.PLAIN,
        region=name,
        central_region=spec["centralRegionName"],
        service_user=user,
        database_connection=db_url(spec, creds, f"neutron_{name.lower()}"),
        transport_url=creds.transport(name),
        central_client=service_user(spec, keystone, ISTHMUS_USER, creds.service_password, name)
        if cross else None,
        availability_zone=spec.get("availabilityZone") or f"az{spec['index'] + 1}",
        mechanism_drivers=",".join(n.get("ml2MechanismDrivers") or ["openvswitch"]),
        vni_ranges=",".join(n.get("vniRanges") or [vni_range(spec["index"])]),
        network_vlan_ranges=",".join(n.get("networkVlanRanges") or ["physnet1:100:2999"]),
        host=f"neutron-{name}",
        state_path="/var/lib/neutron",
        lock_path="/var/lib/neutron/lock",
    )


# Schema (and, for Nova, the cell mappings: cell0 in ``<database>_cell0``, one cell1)
# before the API starts; each step is a no-op when already done, so the Job can rerun.
DB_SYNC = {
    "nova": "m='nova-manage --config-file {conf}'; $m api_db sync; $m cell_v2 map_cell0; "
            "$m cell_v2 list_cells | grep -q ' cell1 ' || $m cell_v2 create_cell --name cell1; $m db sync",
    "cinder": "cinder-manage --config-file {conf} db sync",
}


def compute_conf(key: str, spec: Obj, creds: Credentials, user: ServiceUser, rname: str) -> ini.Sections:
    """nova.conf or cinder.conf of a region's API (mode Deploy), from the renderer the sandbox uses."""
    zone = spec.get("availabilityZone") or f"az{spec['index'] + 1}"
    if key == "nova":
        return compute.nova_conf(compute.NovaValues(
            transport_url=creds.transport(rname),
            database_connection=db_url(spec, creds, f"nova_{rname.lower()}"),
            api_database_connection=db_url(spec, creds, f"nova_api_{rname.lower()}"),
            service_user=user, availability_zone=zone))
    return compute.cinder_conf(compute.CinderValues(
        transport_url=creds.transport(rname), database_connection=db_url(spec, creds, f"cinder_{rname.lower()}"),
        service_user=user, availability_zone=zone))


def region_objects(region: Obj, creds: Credentials, keystone: Endpoints) -> list[Obj]:
    """Neutron (unless an existing control plane serves the region), optional Nova/Cinder APIs,
    and one EndpointRegistration per service type."""
    spec = model.defaulted_spec("Region", region.get("spec"))
    name, rname = region["metadata"]["name"], spec["name"]
    out: list[Obj] = []
    urls = region_endpoints(region)
    if not spec.get("existingControlPlane"):
        values = region_neutron_values(region, creds, keystone)
        files = {"neutron.conf": ini.render(neutron.neutron_conf(values)),
                 "ml2_conf.ini": ini.render(neutron.ml2_conf(values))}
        if spec["neutron"].get("customServiceConfig"):
            files["custom.conf"] = spec["neutron"]["customServiceConfig"]
        config = secret(region, f"{name}-neutron-config", "neutron", files, rname)
        conf_dir = "/etc/neutron/conf"
        pod = Pod("neutron", image(spec, "neutron"), [], config_secret=config["metadata"]["name"],
                  config_dir=conf_dir, env=(("OS_NEUTRON_CONFIG_DIR", conf_dir),
                                            ("OS_NEUTRON_CONFIG_FILES", ";".join(files))))
        conf_args = [arg for file in files for arg in ("--config-file", f"{conf_dir}/{file}")]
        out += [config,
                job(region, schema_job_name(f"{name}-neutron-db-sync", spec),
                    _replace(pod, command=["neutron-db-manage", *conf_args, "upgrade", "heads"]), spec, [config],
                    rname),
                deployment(region, f"{name}-neutron",
                           _replace(pod, command=gunicorn("neutron.wsgi.api:application", NEUTRON_PORT, spec),
                                    port=NEUTRON_PORT),
                           spec, spec["neutron"]["replicas"], [config], rname,
                           networks=spec["neutron"].get("networkAttachments")),
                *service_pair(region, f"{name}-neutron", "neutron", NEUTRON_PORT, rname, spec.get("service"))]
    for key, port, app in (("nova", NOVA_PORT, "nova.wsgi.osapi_compute:application"),
                           ("cinder", CINDER_PORT, "cinder.wsgi.api:application")):
        section = spec[key]
        if not section["enabled"] or section["mode"] != "Deploy":
            continue
        user = service_user(spec, keystone, key, creds.service_password, rname)
        conf = compute_conf(key, spec, creds, user, rname)
        config = secret(region, f"{name}-{key}-config", key, {f"{key}.conf": ini.render(ini.prune(conf))}, rname)
        pod = Pod(f"{key}-api", image(spec, key), gunicorn(app, port, spec), config_secret=config["metadata"]["name"],
                  config_dir=f"/etc/{key}/conf", env=((f"OS_{key.upper()}_CONFIG_DIR", f"/etc/{key}/conf"),),
                  port=port)
        sync = _replace(pod, command=["sh", "-ec", DB_SYNC[key].format(conf=f"/etc/{key}/conf/{key}.conf")], port=None)
        out += [config, job(region, schema_job_name(f"{name}-{key}-db-sync", spec), sync, spec, [config], rname),
                deployment(region, f"{name}-{key}-api", pod, spec, section["replicas"], [config], rname),
                *service_pair(region, f"{name}-{key}", f"{key}-api", port, rname, spec.get("service"))]
    # The one Keystone is catalogued in every region too, as the sandbox does, so
    # clients pinned to any region find identity in their catalogue.
    out.append(endpoint_registration(region, spec, "identity", keystone, rname))
    for service_type, url in urls.items():
        if service_type == "network" and spec.get("existingControlPlane"):
            continue  # the deploying operator registers its own Neutron
        out.append(endpoint_registration(region, spec, service_type, url, rname))
    return out + disruption_budgets(region, out)


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


def custom_service_config(region: Obj, creds: Credentials, keystone: Endpoints) -> str:
    """The customServiceConfig snippet for an existing OpenStackControlPlane's Neutron (RHOSO)."""
    return neutron.custom_service_config(region_neutron_values(region, creds, keystone))


def control_plane_patch(snippet: str) -> dict[str, Any]:
    """Merge patch of an OpenStackControlPlane: the local plugin into its Neutron template."""
    return {"spec": {"neutron": {"template": {"customServiceConfig": snippet}}}}


# --- CentralNetwork --------------------------------------------------------------------------------------------------

def central_endpoints(cnet: Obj) -> tuple[Endpoints, str]:
    """(central Neutron URLs, Admin API URL)."""
    spec = model.defaulted_spec("CentralNetwork", cnet.get("spec"))
    name, ns = cnet["metadata"]["name"], namespace_of(cnet)
    return (endpoints(spec, f"{name}-neutron", ns, NEUTRON_PORT),
            service_url(spec, f"{name}-admin-api", ns, spec["adminAPI"]["port"]))


def central_objects(cnet: Obj, creds: Credentials, keystone: Endpoints,
                    registered: Iterable[tuple[str, str]] = ()) -> list[Obj]:
    """Central Neutron, the Admin API and xjob, their Services, schema Jobs, the
    Admin API's registration and a Job registering ``registered`` (region, AZ) pods."""
    spec = model.defaulted_spec("CentralNetwork", cnet.get("spec"))
    name, central = cnet["metadata"]["name"], spec["centralRegionName"]
    isthmus_db = db_url(spec, creds, "isthmus", spec)
    user = service_user(spec, keystone, "neutron", creds.service_password, central)
    isthmus_user = service_user(spec, keystone, ISTHMUS_USER, creds.service_password, central)
    values = neutron.NeutronValues(
        role=neutron.CENTRAL, region=central, central_region=central, service_user=user,
        database_connection=db_url(spec, creds, "neutron_central", spec), transport_url=creds.transport(central),
        isthmus_database_connection=isthmus_db,
        type_drivers=",".join(spec.get("typeDrivers") or ["flat", "vlan", "vxlan"]),
        tenant_network_types=",".join(spec.get("tenantNetworkTypes") or ["vxlan"]),
        vni_ranges=",".join(spec.get("vniRanges") or ["1:99999"]),
        flat_networks=",".join(spec.get("flatNetworks") or ["*"]),
        network_vlan_ranges=",".join(spec.get("networkVlanRanges") or ["physnet1:100:2999"]),
        host=f"neutron-{central}", state_path="/var/lib/neutron", lock_path="/var/lib/neutron/lock")
    neutron_files = {"neutron.conf": ini.render(neutron.neutron_conf(values)),
                     "ml2_conf.ini": ini.render(neutron.ml2_conf(values))}
    n_config = secret(cnet, f"{name}-neutron-config", "neutron", neutron_files, central)
    admin_port = spec["adminAPI"]["port"]
    a_config = secret(cnet, f"{name}-admin-api-config", "isthmus-admin", {"admin-api.conf": ini.render(
        services.admin_api_conf(services.AdminAPIValues("0.0.0.0", admin_port, isthmus_db, isthmus_user,
                                                        tls=served_tls(spec))))}, central)
    x_config = secret(cnet, f"{name}-xjob-config", "isthmus-xjob", {"xjob.conf": ini.render(ini.prune(
        services.xjob_conf(services.XJobValues(
            isthmus_db, central, isthmus_user, metrics_port=XJOB_METRICS_PORT, metrics_bind_host="0.0.0.0",
            gateway_master_region=(spec.get("xjob") or {}).get("gatewayMasterRegion"))))), }, central)
    conf_dir = "/etc/neutron/conf"
    n_pod = Pod("neutron", image(spec, "neutron"), [], config_secret=f"{name}-neutron-config", config_dir=conf_dir,
                env=(("OS_NEUTRON_CONFIG_DIR", conf_dir), ("OS_NEUTRON_CONFIG_FILES", "neutron.conf;ml2_conf.ini")))
    conf_args = ["--config-file", f"{conf_dir}/neutron.conf", "--config-file", f"{conf_dir}/ml2_conf.ini"]
    i_dir = "/etc/isthmus/conf"
    admin_pod = Pod("isthmus-admin", image(spec, "isthmus"),
                    ["isthmus-admin", "--config-file", f"{i_dir}/admin-api.conf"],
                    config_secret=f"{name}-admin-api-config", config_dir=i_dir, port=admin_port)
    xjob_pod = Pod("isthmus-xjob", image(spec, "isthmus"), ["isthmus-xjob", "--config-file", f"{i_dir}/xjob.conf"],
                   config_secret=f"{name}-xjob-config", config_dir=i_dir, metrics_port=XJOB_METRICS_PORT)
    # The registry's URL holds the database password: the Jobs read it from a Secret, not
    # from a plain env value in their (widely readable) spec.
    db_secret = secret(cnet, f"{name}-isthmus-db", "isthmus-db", {"url": isthmus_db}, central)
    db_env = registry_url_env(cnet)
    db_pod = Pod("isthmus-db", image(spec, "isthmus"), ["sh", "-c", 'isthmus db upgrade --db-url "$ISTHMUS_DB_URL"'],
                 secret_env=db_env)
    neutron_urls, admin_url = central_endpoints(cnet)
    out = [
        n_config, a_config, x_config, db_secret,
        job(cnet, schema_job_name(f"{name}-isthmus-db-sync", spec), db_pod, spec, [], central),
        job(cnet, schema_job_name(f"{name}-neutron-db-sync", spec),
            _replace(n_pod, command=["neutron-db-manage", *conf_args, "upgrade", "heads"]), spec, [n_config], central),
        deployment(cnet, f"{name}-neutron", _replace(n_pod, command=gunicorn("neutron.wsgi.api:application",
                                                                              NEUTRON_PORT, spec), port=NEUTRON_PORT),
                   spec, spec["replicas"], [n_config], central),
        deployment(cnet, f"{name}-admin-api", admin_pod, spec, spec["adminAPI"]["replicas"], [a_config], central),
        deployment(cnet, f"{name}-xjob", xjob_pod, spec, spec["xjob"]["replicas"], [x_config], central),
        *service_pair(cnet, f"{name}-neutron", "neutron", NEUTRON_PORT, central, None),
        service(cnet, f"{name}-admin-api", "isthmus-admin", admin_port, central),
        endpoint_registration(cnet, spec, "network", neutron_urls, central),
        endpoint_registration(cnet, spec, "multiregion", Endpoints(admin_url, admin_url), central),
    ]
    pods = sorted(set(registered))
    if pods:
        out.append(pods_job(cnet, spec, pods, db_env, central))
    return out + disruption_budgets(cnet, out)


def registry_url_env(cnet: Obj) -> tuple[tuple[str, str, str], ...]:
    """``ISTHMUS_DB_URL`` from the CentralNetwork's ``<cnet>-isthmus-db`` Secret (its Jobs' and
    the remove-pod Job's)."""
    return (("ISTHMUS_DB_URL", f"{cnet['metadata']['name']}-isthmus-db", "url"),)


def pods_job(cnet: Obj, spec: Mapping[str, Any], pods: list[tuple[str, str]], db_env: tuple[tuple[str, str, str], ...],
             central: str) -> Obj:
    """Registers the central pod and the regions' pods in the Isthmus registry; the Job's
    name carries the hash of the list, so a new list is a new Job (Jobs are immutable)."""
    args = [f"{central}:"] + [f"{region}:{az}" for region, az in pods]
    digest = hashlib.sha256(json.dumps(args).encode()).hexdigest()[:8]
    pod = Pod("isthmus-pods", image(spec, "isthmus"),
              ["sh", "-c", 'exec isthmus operator ensure-pods --db-url "$ISTHMUS_DB_URL" "$@"', "ensure-pods", *args],
              secret_env=db_env)
    out = job(cnet, f"{cnet['metadata']['name']}-pods-{digest}", pod, spec, [], central)
    out["metadata"]["labels"]["isthmus.dev/pods-job"] = "true"
    return out


def remove_pod_job(region: Obj, cnet: Obj) -> Obj:
    """Removes a deleted Region's pod from the Isthmus registry (``isthmus operator
    remove-pod``), with the registry URL of its CentralNetwork. Owned by the Region
    (whose finalizer waits for it), named with its uid (a later namesake is another
    Region); retried by Kubernetes with its capped back-off while the region still holds
    users' objects, the reason in the container's termination message."""
    spec = model.defaulted_spec("CentralNetwork", cnet.get("spec"))
    rname = region["spec"]["name"]
    uid = (region["metadata"].get("uid") or "")[:8]
    pod = Pod("isthmus-remove-pod", image(spec, "isthmus"),
              ["sh", "-c", 'exec isthmus operator remove-pod --db-url "$ISTHMUS_DB_URL" "$1"', "remove-pod", rname],
              secret_env=registry_url_env(cnet))
    out = job(region, f"{region['metadata']['name']}-remove-pod" + (f"-{uid}" if uid else ""), pod, spec, [], rname)
    out["spec"]["backoffLimit"] = REMOVE_POD_RETRIES
    container = out["spec"]["template"]["spec"]["containers"][0]
    container["terminationMessagePolicy"] = "FallbackToLogsOnError"  # the "still holds ..." line
    return out


REMOVE_POD_RETRIES = 100  # Kubernetes' back-off caps at 6 min: days of waiting for a region to drain


# --- APIGateway ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Backend:
    region: str
    nova_url: str
    cinder_url: str
    az: str


def gateway_backends(gw: Obj, regions: Iterable[Obj]) -> list[Backend]:
    out = []
    for region in regions:
        rname = region["spec"]["name"]
        urls = region_endpoints(region)
        out.append(Backend(rname, urls["compute"].internal if "compute" in urls else "",
                           urls["volumev3"].internal if "volumev3" in urls else "",
                           region["spec"].get("availabilityZone", "")))
    return sorted(out, key=lambda b: b.region)


def gateway_endpoints(gw: Obj) -> Endpoints:
    spec = model.defaulted_spec("APIGateway", gw.get("spec"))
    return endpoints(spec, gw["metadata"]["name"], namespace_of(gw), GATEWAY_PORT, overrides=spec.get("service"))


def gateway_objects(gw: Obj, creds: Credentials, keystone: Endpoints, backends: list[Backend],
                    selected: Iterable[str]) -> list[Obj]:
    """The gateway for ``selected`` regions (its ``[gateway] regions``, ready or not: a
    region that is down stays behind the gateway, whose breakers handle it); ``backends``,
    the ready ones, only pick the default master region."""
    spec = model.defaulted_spec("APIGateway", gw.get("spec"))
    name, where = gw["metadata"]["name"], spec["regionName"]
    urls = gateway_endpoints(gw)
    user = service_user(spec, keystone, ISTHMUS_USER, creds.service_password, spec["centralRegionName"])
    values = services.GatewayValues(
        bind_host="0.0.0.0", bind_port=GATEWAY_PORT, public_url=urls.public, central_region=spec["centralRegionName"],
        master_region=spec.get("masterRegion") or (backends[0].region if backends else ""),
        database_connection=db_url(spec, creds, "isthmus"), service_user=user, list_timeout=None, catalog_ttl=None,
        interface="internal", placement_policy=spec.get("placementPolicy"), regions=tuple(sorted(selected)),
        tls=served_tls(spec))
    config = secret(gw, f"{name}-config", "isthmus-gateway",
                    {"gateway.conf": ini.render(ini.prune(services.gateway_conf(values)))}, where)
    pod = Pod("isthmus-gateway", image(spec, "isthmus"),
              ["isthmus-gateway", "--config-file", "/etc/isthmus/conf/gateway.conf"],
              config_secret=config["metadata"]["name"], config_dir="/etc/isthmus/conf", port=GATEWAY_PORT,
              extra_volumes=())
    out = [config, deployment(gw, name, pod, spec, spec["replicas"], [config], where),
           *service_pair(gw, name, "isthmus-gateway", GATEWAY_PORT, where, spec.get("service"))]
    if spec["nova"]:
        out.append(endpoint_registration(gw, spec, "compute", Endpoints(urls.public + "/compute/v2.1",
                                                                        urls.internal + "/compute/v2.1"), where))
    if spec["cinder"]:
        out.append(endpoint_registration(gw, spec, "volumev3", Endpoints(urls.public + "/volume/v3",
                                                                         urls.internal + "/volume/v3"), where))
    return out + disruption_budgets(gw, out)


# --- CloudControllerConfig -------------------------------------------------------------------------------------------

def ccm_objects(ccm: Obj, credential: tuple[str, str], keystone: Endpoints, regions: list[str]) -> list[Obj]:
    """``cloud.conf`` in the target Secret (kube-system/cloud-config by default) and the
    OCCM environment ConfigMap next to it."""
    spec = model.defaulted_spec("CloudControllerConfig", ccm.get("spec"))
    target = spec["target"]
    lb = spec.get("loadBalancer") or {}
    text = cloudconf.cloud_conf(cloudconf.CloudConfValues(
        auth_url=keystone.public, region=regions[0] if regions else "", regions=tuple(regions),
        application_credential_id=credential[0], application_credential_secret=credential[1],
        floating_network_id=lb.get("floatingNetworkID", ""), subnet_id=lb.get("subnetID", ""),
        lb_provider=lb.get("provider", "")))
    conf = secret(ccm, target["secretName"], "cloud-controller-manager", {"cloud.conf": text},
                  namespace=target["namespace"])
    env = {"OS_CCM_REGIONAL": "true" if spec["regionalProviderID"] else "false"}
    env_map = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": metadata(ccm, f"{target['secretName']}-env", "cloud-controller-manager",
                                    namespace=target["namespace"]), "data": env}
    return [conf, env_map]


def rendered_hash(objects: Iterable[Obj]) -> str:
    return config_hash(*objects)


# --- EndpointRegistration --------------------------------------------------------------------------------------------

def registration_job(reg: Obj, keystone: Endpoints, identity_region: str, delete: bool = False) -> Obj:
    """A Job that creates the region, service and public/internal endpoints if missing and
    fixes their URLs (``isthmus operator register-endpoint``: openstacksdk as the admin,
    idempotent); with ``delete``, one that removes the endpoints (deregistration)."""
    spec = reg["spec"]
    args = ["--service-type", spec["serviceType"], "--service-name", spec["serviceName"], "--region", spec["region"],
            "--public", spec["endpoints"]["public"], "--internal", spec["endpoints"]["internal"]]
    if delete:
        args.append("--delete")
    env = (("OS_AUTH_URL", keystone.internal), ("OS_REGION_NAME", identity_region))
    pod = Pod("endpoint-registration", spec.get("image") or DEFAULT_IMAGE,
              ["isthmus", "operator", "register-endpoint", *args], env=env,
              secret_env=(("OS_PASSWORD", spec["secret"], "admin-password"),))
    digest = hashlib.sha256(json.dumps(args).encode()).hexdigest()[:8]
    return job(reg, f"{reg['metadata']['name']}-{digest}", pod, spec, [], spec["region"])
