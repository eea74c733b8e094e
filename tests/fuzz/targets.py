"""The pairs of a running sandbox: stock service and its Isthmus counterpart.

| pair | stock | Isthmus |
|---|---|---|
| neutron-central | the stock ML2 neutron-server (``sandbox up --stock-neutron``) | central Neutron, central plugin |
| neutron-region | the same stock neutron-server | RegionOne's Neutron, local plugin |
| nova-gateway | RegionOne's nova-api | isthmus-gateway's compute endpoint |
| cinder-gateway | RegionOne's cinder-api | isthmus-gateway's volume endpoint |
| admin | none (its own spec: never a 5xx) | the Admin API, in this process, on a fresh database |

Every pair works in a project and as a user made for the campaign (bindings,
keypairs and quotas that requests change are theirs alone), plus the admin
user for a share of the requests; each side gets its own network, subnet,
port and security group to aim member requests at. :func:`cleanup` removes
what the campaign made.
"""

from __future__ import annotations

import json
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from tests.fuzz import apis
from tests.fuzz.campaign import MISSING_ID, Endpoint, Pair, http_sender

CENTRAL = "CentralRegion"
REGION = "RegionOne"
PAIRS = ("neutron-central", "neutron-region", "nova-gateway", "cinder-gateway", "admin")
# A project whose quotas requests may change (never one a test or the campaign works in).
QUOTA_PROJECT = "f022f022f022f022f022f022f022f022"


@dataclass
class Identity:
    token: str
    project_id: str
    user_id: str


@dataclass
class Campaign:
    """What a campaign made in the sandbox, to undo afterwards."""

    layout: Any
    admin: Identity
    member: Identity
    started: str  # ISO time; Neutron objects created since are the campaign's
    flavors_before: set[str]


def _token(layout, user: str, project: str, password: str) -> Identity:
    body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": user, "domain": {"name": "Default"}, "password": password}}},
        "scope": {"project": {"name": project, "domain": {"name": "Default"}}}}}
    resp = requests.post(f"{layout.auth_url}/auth/tokens", json=body, timeout=60)
    resp.raise_for_status()
    token = resp.json()["token"]
    return Identity(resp.headers["X-Subject-Token"], token["project"]["id"], token["user"]["id"])


def _ok(resp: requests.Response) -> dict:
    if resp.status_code >= 400:
        raise AssertionError(f"{resp.request.method} {resp.request.url} -> {resp.status_code}: {resp.text[:500]}")
    return resp.json() if resp.content else {}


def _campaign_identity(layout, admin: Identity) -> Identity:
    """A project and a member user of the campaign's own."""
    from isthmus.sandbox.layout import PASSWORD

    name = f"fuzz-{uuid.uuid4().hex[:8]}"
    headers = {"X-Auth-Token": admin.token}
    base = layout.auth_url
    project = _ok(requests.post(f"{base}/projects", json={"project": {"name": name, "domain_id": "default"}},
                                headers=headers, timeout=60))["project"]
    user = _ok(requests.post(f"{base}/users", json={"user": {"name": name, "domain_id": "default",
                                                             "password": PASSWORD}},
                             headers=headers, timeout=60))["user"]
    roles = _ok(requests.get(f"{base}/roles?name=member", headers=headers, timeout=60))["roles"]
    _ok(requests.put(f"{base}/projects/{project['id']}/users/{user['id']}/roles/{roles[0]['id']}",
                     headers=headers, timeout=60))
    return _token(layout, name, name, PASSWORD)


def start(layout) -> Campaign:
    from isthmus.sandbox.layout import PASSWORD

    admin = _token(layout, "admin", "admin", PASSWORD)
    member = _campaign_identity(layout, admin)
    flavors = set()
    if layout.compute:
        resp = requests.get(f"{layout.url(layout.region_port(REGION, 'nova'))}/v2.1/flavors?is_public=None",
                            headers={"X-Auth-Token": admin.token}, timeout=60)
        flavors = {f["id"] for f in _ok(resp)["flavors"]}
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
    return Campaign(layout, admin, member, started, flavors)


# --- Neutron ---------------------------------------------------------------------------

def _neutron_objects(url: str, token: str, tag: str, network_url: str | None = None) -> dict[str, str]:
    """A network with a subnet, a port and a security group, made as ``token``'s
    user; the network and group at ``network_url`` (central, for a region), the
    port at ``url``. {placeholder: id}."""
    headers = {"X-Auth-Token": token}
    home = network_url or url
    net = _ok(requests.post(f"{home}/v2.0/networks", json={"network": {"name": tag}}, headers=headers,
                            timeout=60))["network"]
    subnet = _ok(requests.post(f"{home}/v2.0/subnets", json={"subnet": {
        "network_id": net["id"], "ip_version": 4, "cidr": "10.202.0.0/24", "name": tag}},
        headers=headers, timeout=60))["subnet"]
    group = _ok(requests.post(f"{home}/v2.0/security-groups", json={"security_group": {"name": tag}},
                              headers=headers, timeout=60))["security_group"]
    port = _ok(requests.post(f"{url}/v2.0/ports", json={"port": {"network_id": net["id"], "name": tag}},
                             headers=headers, timeout=60))["port"]
    rule = group["security_group_rules"][0]["id"] if group.get("security_group_rules") else MISSING_ID
    return {"{networks}": net["id"], "{subnets}": subnet["id"], "{ports}": port["id"],
            "{security-groups}": group["id"], "{security-group-rules}": rule}


def _neutron_endpoint(name: str, url: str, campaign: Campaign, network_url: str | None = None) -> Endpoint:
    # The member's objects serve the admin's requests too (an admin reaches every project's).
    objects = _neutron_objects(url, campaign.member.token, f"fuzz-{name}", network_url)
    fill = {"member": objects, "admin": objects}
    return Endpoint(name, http_sender(url), {"member": campaign.member.token, "admin": campaign.admin.token}, fill)


def neutron_pairs(campaign: Campaign, schemas: dict) -> list[Pair]:
    layout = campaign.layout
    if not layout.stock_neutron:
        raise RuntimeError("the sandbox has no stock Neutron: start it with `isthmus sandbox up --stock-neutron`")
    api = apis.neutron_api(schemas["neutron"])
    central_url = layout.url(layout.central_neutron_port)
    stock_url = layout.url(layout.stock_neutron_port)
    region_url = layout.url(layout.neutron_port(REGION))
    return [
        Pair("neutron-central", api, _neutron_endpoint("central", central_url, campaign),
             _neutron_endpoint("stock", stock_url, campaign)),
        Pair("neutron-region", api, _neutron_endpoint("region", region_url, campaign, network_url=central_url),
             _neutron_endpoint("stock-r", stock_url, campaign)),
    ]


# --- Nova and Cinder through the gateway -------------------------------------------------

def _fill(campaign: Campaign, **extra: str) -> dict[str, dict[str, str]]:
    return {who: {"{project}": ident.project_id, "{quota_project}": QUOTA_PROJECT, **extra}
            for who, ident in (("member", campaign.member), ("admin", campaign.admin))}


def gateway_pairs(campaign: Campaign, schemas: dict) -> list[Pair]:
    layout = campaign.layout
    tokens = {"member": campaign.member.token, "admin": campaign.admin.token}
    gateway = layout.url(layout.gateway_port)
    nova = apis.nova_api(schemas["nova"])
    cinder = apis.cinder_api(schemas["cinder"])
    return [
        Pair("nova-gateway", nova, Endpoint("gateway", http_sender(f"{gateway}/compute/v2.1"), tokens,
                                            _fill(campaign)),
             Endpoint("nova-api", http_sender(f"{layout.url(layout.region_port(REGION, 'nova'))}/v2.1"), tokens,
                      _fill(campaign))),
        Pair("cinder-gateway", cinder,
             Endpoint("gateway", http_sender(f"{gateway}/volume/v3"), tokens, _fill(campaign), prefix="/{project}"),
             Endpoint("cinder-api", http_sender(f"{layout.url(layout.region_port(REGION, 'cinder'))}/v3"),
                      tokens, _fill(campaign), prefix="/{project}")),
    ]


# --- the Admin API, in this process --------------------------------------------------------

@contextmanager
def admin_pair() -> Iterator[Pair]:
    """The Admin API's WSGI pipeline (request ids, proxy headers, body size limit, the
    app) on a fresh SQLite database, with keystonemiddleware's headers for a valid
    token set on each request (test_pipeline.py covers the middleware itself)."""
    import webob
    from oslo_middleware import http_proxy_to_wsgi, request_id, sizelimit

    from isthmus import jobs, registry
    from isthmus.admin import wsgi
    from isthmus.admin.app import AdminApi
    from isthmus.admin.policy import make_enforcer
    from isthmus.db import make_engine

    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'isthmus.sqlite'}")
        registry.create_schema(engine)
        jobs.create_schema(engine)
        conf = wsgi.make_conf([], [])
        handlers = jobs.HandlerRegistry()
        handlers.register("shadow_port", lambda ctx: None, resource_keys=("pod_id", "port_id"))
        handlers.register("network_update", lambda ctx: None, resource_keys=("network_id",))
        handlers.register("plain", lambda ctx: None)
        core = AdminApi(registry.Registry(engine), jobs.JobStore(engine), handlers, make_enforcer(conf),
                        max_limit=conf.pagination_max_limit)
        app = request_id.RequestId(http_proxy_to_wsgi.HTTPProxyToWSGI(sizelimit.RequestBodySizeLimiter(core, conf),
                                                                      conf))
        pods = registry.Registry(engine)
        pod = pods.create_pod("RegionOne", az_name="az1")
        routing = pods.create_routing(top_id="t1", bottom_id="b1", pod_id=pod.pod_id, project_id="p1",
                                      resource_type="network")
        binding = core.bindings.create("p1", pod.pod_id)
        job = core.store.submit(jobs.JobRequest("plain", "r1", "p1"))
        ids = {"{pods}": pod.pod_id, "{routings}": str(routing.id), "{bindings}": str(binding.id),
               "{jobs}": job.id}

        def send(method: str, path: str, body: bytes | None, headers) -> int:
            req = webob.Request.blank(path.split("?")[0], method=method)
            if "?" in path:
                req.query_string = path.split("?", 1)[1]
            req.headers.update(headers)
            req.headers.update({"X-Identity-Status": "Confirmed", "X-Roles": headers.pop("X-Roles", "admin")})
            if body is not None:
                req.body = body
            try:
                return req.get_response(app).status_int
            except Exception:  # noqa: BLE001 - escaped the app: a WSGI server answers 500
                return 500

        roles = {"admin": "admin", "member": "member"}

        def sender(method: str, path: str, body: bytes | None, headers) -> int:
            who = headers.pop("X-Auth-Token")
            return send(method, path, body, {**headers, "X-Roles": roles[who], "X-Project-Id": f"{who}-project"})

        try:
            yield Pair("admin", apis.admin_api(),
                       Endpoint("admin-api", sender, {"member": "member", "admin": "admin"},
                                {"member": ids, "admin": ids}))
        finally:
            engine.dispose()


# --- afterwards --------------------------------------------------------------------------

def cleanup(campaign: Campaign) -> list[str]:
    """Remove what the campaign made (Neutron objects created since it started, new
    flavors, the campaign's project and user); returns what could not be removed."""
    layout = campaign.layout
    headers = {"X-Auth-Token": campaign.admin.token}
    left: list[str] = []
    ours = {campaign.member.project_id, campaign.admin.project_id}
    urls = [layout.url(layout.central_neutron_port), layout.url(layout.neutron_port(REGION))]
    if layout.stock_neutron:
        urls.append(layout.url(layout.stock_neutron_port))
    for url in urls:
        for collection, key in (("ports", "ports"), ("subnets", "subnets"), ("networks", "networks"),
                                ("security-groups", "security_groups")):
            try:
                items = [i for project in sorted(ours)
                         for i in _all(f"{url}/v2.0/{collection}?project_id={project}", key, headers)]
            except (requests.RequestException, ValueError) as err:
                left.append(f"{url} {collection}: {err}")
                continue
            for item in items:
                if item.get("created_at", "") < campaign.started or item.get("name") == "default":
                    continue
                if item.get("project_id") not in ours:  # e.g. a region's copy of another test's network
                    continue
                if collection == "ports" and (item.get("device_owner") or "").startswith("network:"):
                    continue
                resp = requests.delete(f"{url}/v2.0/{collection}/{item['id']}", headers=headers, timeout=120)
                if resp.status_code >= 400 and resp.status_code != 404:
                    left.append(f"{url} {collection}/{item['id']}: {resp.status_code}")
    if layout.compute:
        left += _remove_servers_and_volumes(campaign, ours)
        gateway = f"{layout.url(layout.gateway_port)}/compute/v2.1"
        flavors = requests.get(f"{gateway}/flavors?is_public=None", headers=headers, timeout=120).json()
        for flavor in flavors.get("flavors", []):
            if flavor["id"] not in campaign.flavors_before:
                requests.delete(f"{gateway}/flavors/{flavor['id']}", headers=headers, timeout=120)
    requests.delete(f"{layout.auth_url}/users/{campaign.member.user_id}", headers=headers, timeout=60)
    requests.delete(f"{layout.auth_url}/projects/{campaign.member.project_id}", headers=headers, timeout=60)
    return left


def _remove_servers_and_volumes(campaign: Campaign, ours: set[str]) -> list[str]:
    """Servers and volumes a request made (a schema-valid create can succeed), in every region."""
    layout = campaign.layout
    headers = {"X-Auth-Token": campaign.admin.token, "Accept": "application/json"}
    left = []
    for region in layout.regions:
        nova = f"{layout.url(layout.region_port(region, 'nova'))}/v2.1"
        cinder = f"{layout.url(layout.region_port(region, 'cinder'))}/v3/{campaign.admin.project_id}"
        for url, key, member in ((f"{nova}/servers/detail?all_tenants=1", "servers", f"{nova}/servers"),
                                 (f"{cinder}/volumes/detail?all_tenants=1", "volumes", f"{cinder}/volumes")):
            try:
                items = requests.get(url, headers=headers, timeout=120).json().get(key, [])
            except (requests.RequestException, ValueError) as err:
                left.append(f"{url}: {err}")
                continue
            for item in items:
                owner = item.get("tenant_id") or item.get("os-vol-tenant-attr:tenant_id")
                created = item.get("created") or item.get("created_at") or ""
                if owner in ours and created.replace(" ", "T")[:19] >= campaign.started[:19]:
                    resp = requests.delete(f"{member}/{item['id']}", headers=headers, timeout=120)
                    if resp.status_code >= 400 and resp.status_code != 404:
                        left.append(f"{member}/{item['id']}: {resp.status_code}")
    return left


def _all(url: str, key: str, headers: dict) -> list[dict]:
    """Every item of a Neutron list, page after page."""
    items: list[dict] = []
    next_url: str | None = url
    while next_url:  # the next link keeps the query
        body = requests.get(next_url, headers=headers, timeout=120).json()
        items += body.get(key, [])
        next_url = next((link["href"] for link in body.get(f"{key}_links", []) if link.get("rel") == "next"), None)
    return items


def describe(pair: Pair) -> str:
    return json.dumps({"pair": pair.name, "isthmus": pair.isthmus.name,
                       "stock": pair.stock.name if pair.stock else None})
