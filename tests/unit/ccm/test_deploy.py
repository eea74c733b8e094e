"""deploy/ccm: valid manifests, and RBAC that covers every Kubernetes call the CCM makes.

Three checks:

* every document parses and uses only fields the Kubernetes API knows (the
  official client's generated models), so ``kubectl apply`` will not reject it;
* statically, every ``kubernetes.client`` API method called anywhere in
  ``isthmus/ccm`` maps (through the client's own request templates) to a
  verb/resource the ServiceAccount is granted;
* dynamically, every request the controllers and the leader elector send to
  kmock in a full scenario is granted by the same rules.
"""

from __future__ import annotations

import ast
import asyncio
import datetime
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kmock
import pytest
import yaml
from kubernetes import client

from isthmus.ccm.config import parse_config
from isthmus.ccm.controllers.lifecycle import LifecycleController
from isthmus.ccm.controllers.node import NodeController
from isthmus.ccm.controllers.service import ServiceCache, ServiceController
from isthmus.ccm.kube.events import NodeEvents
from isthmus.ccm.kube.informer import Informer, NodeCache, WatchSettings, WorkQueue, classify_watch_error
from isthmus.ccm.kube.nodes import TAINT_SHUTDOWN, TAINT_UNINITIALIZED, NodeAPI
from isthmus.ccm.kube.services import ServiceAPI
from isthmus.ccm.openstack.instances import Instances
from isthmus.ccm.openstack.loadbalancer.options import LoadBalancerConfig
from isthmus.ccm.openstack.model import Server, ServerAddress
from isthmus.ccm.service import Manager, Periods, build_parser
from isthmus.kube.leader import LeaseElector
from tests.kmock_clients import api_client

from .fakes import FakeClients, FakeRegion
from .lbfakes import FakeOctavia, FakeOctaviaRegions

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy" / "ccm"
CCM_SOURCE = ROOT / "isthmus" / "ccm"
SHARED_SOURCE = ROOT / "isthmus" / "kube"  # the Lease elector the CCM shares with the operator


def ccm_modules() -> list[Path]:
    return [*CCM_SOURCE.rglob("*.py"), *SHARED_SOURCE.rglob("*.py")]


def documents() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    return docs


def one(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in documents() if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{kind} {name}: {len(found)} documents"
    return found[0]


# --- schema ---------------------------------------------------------------------------------

def check_model(value: Any, type_name: str, path: str) -> None:
    """``value`` fits the client's model ``type_name``; unknown fields are errors."""
    if type_name.startswith("List["):
        assert isinstance(value, list), f"{path}: expected a list"
        for i, item in enumerate(value):
            check_model(item, type_name[5:-1], f"{path}[{i}]")
    elif type_name.startswith("Dict["):
        assert isinstance(value, dict), f"{path}: expected a mapping"
        inner = type_name[type_name.index(",") + 1:-1].strip()
        for key, item in value.items():
            check_model(item, inner, f"{path}.{key}")
    elif type_name in ("str", "bytes", "datetime"):
        assert isinstance(value, str), f"{path}: expected a string, got {value!r}"
    elif type_name == "int":
        assert isinstance(value, int) and not isinstance(value, bool), f"{path}: expected an integer"
    elif type_name == "bool":
        assert isinstance(value, bool), f"{path}: expected a boolean"
    elif type_name == "object":
        pass  # int-or-string and free-form fields
    else:
        model = getattr(client, type_name)
        assert isinstance(value, dict), f"{path}: expected a {type_name} mapping"
        fields = {json_name: attr for attr, json_name in model.attribute_map.items()}
        for key, item in value.items():
            assert key in fields, f"{path}: {type_name} has no field {key!r}"
            check_model(item, model.openapi_types[fields[key]], f"{path}.{key}")


def test_every_document_is_a_valid_object() -> None:
    docs = documents()
    assert {d["kind"] for d in docs} == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                                         "RoleBinding", "Secret", "Deployment"}
    for doc in docs:
        version = doc["apiVersion"].split("/")[-1]
        check_model(doc, f"{version.capitalize()}{doc['kind']}", f"{doc['kind']}/{doc['metadata']['name']}")
        assert doc["metadata"]["name"]


# --- RBAC model -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Access:
    """One API request as RBAC sees it."""

    verb: str
    group: str
    resource: str  # with "/subresource"
    namespace: str | None
    name: str | None


def access_of(method: str, path: str, query: dict[str, list[str]] | None = None) -> Access:
    """RBAC attributes of an API request path (``/api/v1/...`` or ``/apis/G/V/...``)."""
    parts = [p for p in path.split("/") if p]
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        group, rest = parts[1], parts[3:]
    namespace = None
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    name = rest[1] if len(rest) > 1 else None
    verb = {"POST": "create", "PATCH": "patch", "PUT": "update"}.get(method)
    if method == "GET":
        verb = "get" if name else ("watch" if (query or {}).get("watch") == ["true"] else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    assert verb, method
    return Access(verb, group, resource, namespace, name)


def rules_for(service_account: str, namespace: str) -> list[tuple[str | None, dict[str, Any]]]:
    """(namespace or None for cluster-wide, rule) granted to the ServiceAccount."""
    docs = documents()
    subject = {"kind": "ServiceAccount", "name": service_account, "namespace": namespace}
    granted: list[tuple[str | None, dict[str, Any]]] = []
    for binding in docs:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == service_account
                   and s.get("namespace", binding["metadata"].get("namespace")) == subject["namespace"]
                   for s in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        scope = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        role = one(ref["kind"], ref["name"])
        if ref["kind"] == "Role":
            assert role["metadata"]["namespace"] == scope
        granted += [(scope, rule) for rule in role["rules"]]
    return granted


def allowed(access: Access, granted: list[tuple[str | None, dict[str, Any]]]) -> bool:
    for scope, rule in granted:
        if scope is not None and access.namespace != scope:
            continue
        if not ({"*", access.group} & set(rule.get("apiGroups", []))):
            continue
        if not ({"*", access.resource} & set(rule.get("resources", []))):
            continue
        if not ({"*", access.verb} & set(rule.get("verbs", []))):
            continue
        names = rule.get("resourceNames")
        if names and access.name not in names:  # a create has no name: never matched by resourceNames
            continue
        return True
    return False


@dataclass(frozen=True)
class Deployed:
    service_account: str
    namespace: str
    lease_name: str
    lease_namespace: str


def deployed() -> Deployed:
    deployment = one("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "isthmus-ccm")
    args = build_parser().parse_args([a.replace("$(POD_NAME)", "pod-0") for a in container["args"]])
    return Deployed(pod["serviceAccountName"], deployment["metadata"]["namespace"],
                    args.leader_elect_resource_name, args.leader_elect_resource_namespace)


# --- static: every kubernetes.client call in isthmus/ccm -------------------------------------

API_CLASSES = (client.CoreV1Api, client.CoordinationV1Api)


def request_template(method_name: str) -> tuple[str, str] | None:
    """(HTTP method, path template) of a client API method, from the client's own serializer."""
    for api in API_CLASSES:
        serialize = getattr(api, f"_{method_name}_serialize", None)
        if serialize is None:
            continue
        src = inspect.getsource(serialize)
        http = re.search(r"method='([A-Z]+)'", src)
        path = re.search(r"resource_path='([^']+)'", src)
        assert http and path, method_name
        return http.group(1), path.group(1)
    return None


def called_api_methods() -> set[str]:
    names: set[str] = set()
    for path in ccm_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if request_template(node.func.attr) is not None:
                    names.add(node.func.attr)
    return names


def watched_api_methods() -> set[str]:
    """List methods handed to ``kubernetes.watch.Watch().stream(...)``: their ``watch`` verb."""
    names: set[str] = set()
    for path in ccm_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "stream"
                    and node.args and isinstance(node.args[0], ast.Attribute)
                    and request_template(node.args[0].attr) is not None):
                names.add(node.args[0].attr)
    return names


def known_template(method_name: str) -> tuple[str, str]:
    found = request_template(method_name)
    assert found is not None, f"no serializer for {method_name}"
    return found


def code_accesses(lease_name: str = "lease", lease_namespace: str = "kube-system") -> list[tuple[str, Access]]:
    """(API method, RBAC access) of every call and watch in the code."""
    out = []
    for method_name in sorted(called_api_methods()):
        http, template = known_template(method_name)
        lease = "leases" in template
        path = template.replace("{namespace}", lease_namespace if lease else "default").replace(
            "{name}", lease_name if lease else "some-object")
        out.append((method_name, access_of(http, path)))
    for method_name in sorted(watched_api_methods()):
        http, template = known_template(method_name)
        out.append((f"{method_name} (watch)", access_of(http, template, {"watch": ["true"]})))
    return out


def test_code_calls_are_found() -> None:
    # guards the scan itself: these calls exist today
    assert {"list_node", "patch_node", "patch_node_status", "delete_node", "read_node",
            "read_namespaced_lease", "create_namespaced_lease", "patch_namespaced_lease",
            "list_service_for_all_namespaces", "patch_namespaced_service", "patch_namespaced_service_status",
            "create_namespaced_event", "patch_namespaced_event"} <= called_api_methods()
    assert watched_api_methods() == {"list_node", "list_service_for_all_namespaces"}


def test_rbac_covers_every_call_in_the_code() -> None:
    d = deployed()
    granted = rules_for(d.service_account, d.namespace)
    missing = []
    for method_name, access in code_accesses(d.lease_name, d.lease_namespace):
        if not allowed(access, granted):
            missing.append(f"{method_name}: {access}")
    assert not missing, "RBAC in deploy/ccm lacks:\n" + "\n".join(missing)


def test_rbac_grants_nothing_unused() -> None:
    d = deployed()
    used = {(a.group, a.resource, a.verb) for _, a in code_accesses()}
    for _, rule in rules_for(d.service_account, d.namespace):
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    assert (group, resource, verb) in used, f"granted but never used: {verb} {group}/{resource}"


def test_deployment_wiring() -> None:
    deployment = one("Deployment")
    sa = one("ServiceAccount")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["serviceAccountName"] == sa["metadata"]["name"]
    assert sa["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert any(t["key"] == TAINT_UNINITIALIZED for t in pod["tolerations"])
    d = deployed()
    role = one("Role")
    assert role["metadata"]["namespace"] == d.lease_namespace == "kube-system"
    assert any(d.lease_name in r.get("resourceNames", []) for r in role["rules"])

    # --cloud-config points into the mounted Secret, which has a cloud.conf we can read
    container = pod["containers"][0]
    args = build_parser().parse_args([a.replace("$(POD_NAME)", "pod-0") for a in container["args"]])
    mount = next(m for m in container["volumeMounts"] if args.cloud_config.startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    secret = one("Secret", volume["secret"]["secretName"])
    assert secret["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    key = args.cloud_config[len(mount["mountPath"]) + 1:]
    config = parse_config(secret["stringData"][key], "02-cloud-config.yaml")
    assert config.regions == ("RegionOne", "RegionTwo", "RegionThree")
    assert config.global_.application_credential_id and not config.warnings


# --- dynamic: every request of a full scenario ----------------------------------------------

NODES = kmock.resource("", "v1", "nodes")
SERVICES = kmock.resource("", "v1", "services")
UNINIT = {"key": TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule"}


def node(name: str, provider_id: str = "", ready: bool | None = None, taints: list | None = None) -> dict:
    status: dict[str, Any] = {"addresses": []}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    spec: dict[str, Any] = {"taints": taints or []}
    if provider_id:
        spec["providerID"] = provider_id
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec, "status": status}


class Recorder:
    """Records (method, path, query) of every request the client sends; changes nothing."""

    def __init__(self, api: client.ApiClient) -> None:
        self.seen: list[tuple[str, str, dict[str, list[str]]]] = []
        self._call = api.call_api
        # kubernetes' ApiClient has no hook for this: its method is replaced on the instance.
        api.call_api = self  # type: ignore[method-assign]

    def __call__(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        parts = urlsplit(url)
        self.seen.append((method, parts.path, parse_qs(parts.query)))
        return self._call(method, url, *args, **kwargs)


@pytest.fixture
def scenario_cloud() -> Iterator[FakeClients]:
    one_region = FakeRegion("RegionOne", [
        Server("i-1", "node-1", "ACTIVE", "az1", {"original_name": "m1"}, {"net": (ServerAddress("10.0.0.1"),)}),
        Server("i-off", "node-off", "SHUTOFF", "az1", {"original_name": "m1"}),
    ])
    yield FakeClients({"RegionOne": one_region, "RegionTwo": FakeRegion("RegionTwo")})


@pytest.mark.component  # a full run against kmock (tests/tiers.py)
@pytest.mark.asyncio
async def test_rbac_covers_every_request_of_a_full_run(kmock: Any, scenario_cloud: FakeClients) -> None:
    kmock.objects[NODES, None, "node-1"] = node("node-1", taints=[UNINIT])
    kmock.objects[NODES, None, "node-off"] = node("node-off", "openstack://RegionOne/i-off", ready=False)
    kmock.objects[NODES, None, "gone"] = node("gone", "openstack://RegionOne/i-gone", ready=False)
    kmock.objects[NODES, None, "back"] = node("back", "openstack://RegionOne/i-1", ready=True,
                                              taints=[{"key": TAINT_SHUTDOWN, "effect": "NoSchedule"}])
    kmock.objects[NODES, None, "back"].patch({"status": {"addresses": [{"type": "InternalIP",
                                                                         "address": "10.0.0.9"}]}})
    kmock.objects[SERVICES, "default", "web"] = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default", "uid": "u-1"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}]}}
    api = api_client(kmock)
    recorder = Recorder(api)
    d = deployed()
    core = client.CoreV1Api(api)
    nodes = NodeAPI(core)
    events = NodeEvents(core)
    inst = Instances(scenario_cloud, ("RegionOne", "RegionTwo"), environ={})
    cache, queue = NodeCache(), WorkQueue()
    manager = Manager(cache, queue, NodeController(nodes, inst, events=events),
                      LifecycleController(nodes, inst, events=events), Periods(node_status_update=0.0))
    informer = Informer(nodes, cache, queue.add, WatchSettings(read_timeout=0.5))
    # the service controller as isthmus-ccm wires it: a Service informer, Nodes from the node cache
    service_api = ServiceAPI(core)
    services = ServiceController(service_api, FakeOctaviaRegions({
        "RegionOne": FakeOctavia("RegionOne"), "RegionTwo": FakeOctavia("RegionTwo")}),
        LoadBalancerConfig(default={"subnet_id": "s"}), ("RegionOne", "RegionTwo"), sleep=lambda _: None,
        services=ServiceCache(), nodes=cache)
    assert services.services is not None
    service_informer = Informer(service_api, services.services, services.service_changed,
                                WatchSettings(read_timeout=0.5), kind="service")
    informer.subscribe(services.node_changed)

    def follow(watcher: Informer) -> None:
        try:
            watcher.watch_once()  # what changed, as events; then idle until the read timeout
        except Exception as exc:  # noqa: BLE001 - classified by the assertion
            assert classify_watch_error(exc) == "idle", exc
    clock = [0.0]
    elector = LeaseElector(client.CoordinationV1Api(api), d.lease_name, d.lease_namespace, "pod-0",
                           clock=lambda: clock[0], wall_clock=lambda: datetime.datetime.now(datetime.UTC))

    def run() -> None:
        assert elector.try_acquire_or_renew()  # creates the Lease
        informer.relist()
        service_informer.relist()
        manager.step()  # initialise (and its events), lifecycle, addresses
        follow(informer)  # the patches above, as events
        clock[0] += 1
        assert elector.try_acquire_or_renew()  # get + patch
        manager.step()
        events.repeat_after = 0.0
        for _ in range(2):  # the second one counts the first up (a patch)
            events.node_event(nodes.get("node-1"), "Warning", "LookupFailed", "region RegionTwo: down")
        assert services.step() == 1  # finalizer, load balancer, status, events
        follow(service_informer)
        core.delete_namespaced_service("web", "default")  # (the user, not the CCM)
        follow(service_informer)  # the deletionTimestamp
        assert services.step() == 1  # cleanup, finalizer removed
        assert kmock.objects[SERVICES, "default", "web"].deleted  # the finalizer went, so did the Service
        elector.release()

    await asyncio.to_thread(run)
    accesses = {access_of(m, p, q) for m, p, q in recorder.seen}
    kinds = {(a.verb, a.resource) for a in accesses}
    assert {("list", "nodes"), ("watch", "nodes"), ("patch", "nodes"), ("patch", "nodes/status"),
            ("delete", "nodes"), ("create", "events"), ("create", "leases"), ("get", "leases"),
            ("patch", "leases"), ("list", "services"), ("watch", "services"), ("patch", "services"),
            ("patch", "services/status")} <= kinds, kinds
    accesses.discard(Access("delete", "", "services", "default", "web"))
    granted = rules_for(d.service_account, d.namespace)
    denied = [a for a in sorted(accesses, key=str) if not allowed(a, granted)]
    assert not denied, denied


@pytest.mark.component  # the health server over HTTP (tests/tiers.py)
def test_probes_and_metrics_port_match_the_health_server() -> None:
    from isthmus.ccm.health import Health, HealthServer, Metrics

    pod = one("Deployment")["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "isthmus-ccm")
    args = build_parser().parse_args([a.replace("$(POD_NAME)", "pod-0") for a in container["args"]])
    (port,) = container["ports"]
    assert port["containerPort"] == args.http_port == 10258 and args.bind_address == "0.0.0.0"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    annotations = one("Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(args.http_port)
    # the paths are the server's: all three answer 200 on a synced, live replica
    server = HealthServer(Health(lambda: 0.0, lambda: True, lambda: True, clock=lambda: 1.0), Metrics(),
                          "127.0.0.1", 0)
    bound = server.start()
    try:
        import urllib.request

        for path in ("/healthz", "/readyz", annotations["prometheus.io/path"]):
            with urllib.request.urlopen(f"http://127.0.0.1:{bound}{path}", timeout=5) as reply:
                assert reply.status == 200, path
    finally:
        server.stop()
