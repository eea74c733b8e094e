"""Keystone: the one identity service of all regions (catalogued in CentralRegion)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from isthmus.configs.ini import ISTHMUS_USER, overlay
from isthmus.configs.services import KeystoneValues, keystone_conf
from isthmus.operator.objects import fernet_keys
from isthmus.sandbox import config_files, gateway, process, runtime
from isthmus.sandbox.layout import CENTRAL_REGION, PASSWORD, Layout
from isthmus.sandbox.schema_cache import SchemaCache, SQLiteFile, provide_sqlite

# Service users get admin + service on the `service` project, as devstack does.
SERVICE_USERS = ("neutron", "nova", "placement", "glance", "cinder", "octavia", ISTHMUS_USER)
BOOTSTRAP_INTERFACES = ("public", "internal", "admin")
CATALOG_INTERFACES = ("public", "internal")


@dataclass(frozen=True)
class CatalogEntry:
    type: str
    name: str
    region: str
    url: str


def config_path(layout: Layout):
    return layout.etc / "keystone" / "keystone.conf"


def values(layout: Layout) -> KeystoneValues:
    return KeystoneValues(
        database_connection=layout.sqlite_url("keystone"),
        fernet_key_repository=str(layout.data / "keystone-fernet"),
        credential_key_repository=str(layout.data / "keystone-credential"),
        password_hash_rounds=4,  # bcrypt at 4 rounds: fast sandbox logins
    )


# Keystone's own in-process cache (one worker, so nothing to share): without it,
# every authenticated request runs ~40 SQL queries (roles, catalog, token checks),
# ~4x the CPU, and Keystone is busy for every service starting against it.
# Production gets the same caching from memcached (render.services).
CACHE = {"enabled": True, "backend": "dogpile.cache.memory", "expiration_time": 600}


def write_config(layout: Layout) -> None:
    config_files.write(config_path(layout), overlay(keystone_conf(values(layout)), {"cache": CACHE}))


def write_keys(directory: Path) -> None:
    """What ``keystone-manage fernet_setup`` / ``credential_setup`` leave in a new
    key repository (keys 0, staged, and 1, primary; owner-only), without two
    keystone-manage runs of seconds each."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    for index, key in fernet_keys().items():
        path = directory / index
        path.write_text(key)
        path.chmod(0o600)


def _env(layout: Layout) -> dict[str, str]:
    return {"OS_KEYSTONE_CONFIG_FILES": str(config_path(layout))}


def prepare(layout: Layout, cache: SchemaCache | None = None) -> bool:
    """Schema, keys and the bootstrap admin with identity endpoints in CentralRegion.

    The database may come from the cache: with the whole catalogue of a sandbox
    of the same shape (same regions and options; True: ``register`` has nothing
    left to do), or with the bootstrap only (admin, roles, CentralRegion,
    identity service). Either way every endpoint is given this sandbox's ports
    (``point_endpoints``); the keys are made for every sandbox."""
    cache = cache or SchemaCache(None)
    write_config(layout)
    for sub in ("keystone-fernet", "keystone-credential"):
        write_keys(layout.data / sub)
    target = layout.sqlite_path("keystone")
    with_catalog = SQLiteFile(target, after_load=lambda: point_endpoints(layout, with_catalog=True))
    if cache.load_only("keystone catalogue", catalog_entry(layout), with_catalog.load, with_catalog.remove):
        return True
    manage = runtime.tool("keystone-manage")
    conf = ["--config-file", str(config_path(layout))]
    log = layout.logs / "keystone-setup.log"
    url = layout.url(layout.keystone_port, "/v3")
    bootstrap = [
        manage, *conf, "bootstrap",
        "--bootstrap-password", PASSWORD,
        "--bootstrap-region-id", CENTRAL_REGION,
        # Public and internal: keystonemiddleware looks up the internal one.
        "--bootstrap-public-url", url,
        "--bootstrap-internal-url", url,
        "--bootstrap-admin-url", url,
    ]

    def migrate() -> None:
        process.run([manage, *conf, "db_sync"], log, what="keystone-manage db_sync")
        process.run(bootstrap, log, what="keystone-manage bootstrap")

    provide_sqlite(cache, "keystone", "keystone.sqlite", target, migrate,
                   after_load=lambda: point_endpoints(layout, with_catalog=False))
    return False


def expected_endpoints(layout: Layout, with_catalog: bool) -> dict[tuple[str, str, str], str]:
    """(service type, region, interface) -> URL of every endpoint the database
    should hold: bootstrap's three identity endpoints, and the catalogue's."""
    endpoints = {("identity", CENTRAL_REGION, interface): layout.url(layout.keystone_port, "/v3")
                 for interface in BOOTSTRAP_INTERFACES}
    if with_catalog:
        for entry in catalog(layout):
            for interface in CATALOG_INTERFACES:
                endpoints[(entry.type, entry.region, interface)] = entry.url
    return endpoints


def point_endpoints(layout: Layout, with_catalog: bool) -> None:
    """A cached database's endpoints name the ports of the sandbox that made it:
    give each this sandbox's URL. Any other difference (an endpoint more or
    less, another region) is an error: the caller then builds it anew."""
    import sqlite3

    expected = expected_endpoints(layout, with_catalog)
    regions = {CENTRAL_REGION, *(layout.regions if with_catalog else ())}
    conn = sqlite3.connect(layout.sqlite_path("keystone"))
    try:
        with conn:
            rows = conn.execute("SELECT e.id, s.type, e.region_id, e.interface FROM endpoint e "
                                "JOIN service s ON s.id = e.service_id").fetchall()
            found = {(kind, region, interface): endpoint_id for endpoint_id, kind, region, interface in rows}
            have_regions = {region for (region,) in conn.execute("SELECT id FROM region")}
            if len(rows) != len(found) or set(found) != set(expected) or have_regions != regions:
                raise process.SandboxError("the cached keystone database holds another catalogue")
            conn.executemany("UPDATE endpoint SET url = ? WHERE id = ?",
                             [(expected[key], endpoint_id) for key, endpoint_id in found.items()])
    finally:
        conn.close()


def catalog_entry(layout: Layout) -> str:
    """The cache entry of a registered Keystone: named by everything ``register``
    writes except ports (regions, services, URL paths) and by this file (which
    says what ``register`` writes)."""
    shape = [(e.type, e.name, e.region, _port_offset(layout, e.url)) for e in catalog(layout)]
    digest = hashlib.sha256(json.dumps([shape, SERVICE_USERS]).encode() + Path(__file__).read_bytes())
    return f"keystone-catalog-{digest.hexdigest()[:16]}.sqlite"


def _port_offset(layout: Layout, url: str) -> str:
    parsed = urlsplit(url)
    return f"{parsed.scheme}://{parsed.hostname}:+{(parsed.port or 0) - layout.base_port}{parsed.path}"


def start(layout: Layout) -> process.ServiceRecord:
    return runtime.start_wsgi(layout, "keystone", "keystone", layout.keystone_port, _env(layout), health_path="/v3")


def catalog(layout: Layout) -> list[CatalogEntry]:
    """Every endpoint of the sandbox except CentralRegion's identity (bootstrap made it).

    The one Keystone is listed in every region too, as shared-Keystone clouds do, so
    clients pinned to any region find identity in their catalog."""
    entries = [CatalogEntry("identity", "keystone", region, layout.auth_url) for region in layout.regions]
    entries += [CatalogEntry("network", "neutron", CENTRAL_REGION, layout.url(layout.central_neutron_port))]
    entries += [CatalogEntry("multiregion", "isthmus", CENTRAL_REGION, layout.isthmus_url(layout.admin_api_port))]
    for region in layout.regions:
        entries.append(CatalogEntry("network", "neutron", region, layout.url(layout.neutron_port(region))))
        if layout.compute:
            entries += [
                CatalogEntry("compute", "nova", region, layout.url(layout.region_port(region, "nova"), "/v2.1")),
                CatalogEntry("placement", "placement", region, layout.url(layout.region_port(region, "placement"))),
                CatalogEntry("image", "glance", region, layout.url(layout.region_port(region, "glance"))),
            ]
        if layout.volume:
            entries += [
                CatalogEntry("block-storage", "cinder", region,
                             layout.url(layout.region_port(region, "cinder"), "/v3")),
                CatalogEntry("volumev3", "cinderv3", region, layout.url(layout.region_port(region, "cinder"), "/v3")),
            ]
        if layout.octavia:
            entries.append(CatalogEntry("load-balancer", "octavia", region,
                                        layout.url(layout.region_port(region, "octavia"))))
    if layout.compute:
        # isthmus-gateway is CentralRegion's only compute endpoint; its images are the
        # master region's Glance (the gateway replicates them, same UUID, on first boot elsewhere).
        entries += [
            CatalogEntry("compute", "nova", CENTRAL_REGION, gateway.compute_url(layout)),
            CatalogEntry("image", "glance", CENTRAL_REGION,
                         layout.url(layout.region_port(layout.regions[0], "glance"))),
        ]
    if layout.volume:
        entries += [
            CatalogEntry("block-storage", "cinder", CENTRAL_REGION, gateway.volume_url(layout)),
            CatalogEntry("volumev3", "cinderv3", CENTRAL_REGION, gateway.volume_url(layout)),
        ]
    return entries


def admin_connection(layout: Layout, region: str = CENTRAL_REGION):
    """As admin in ``region``; for the stock Neutron (in no catalogue), CentralRegion
    with its network endpoint pointed at the stock server."""
    import openstack

    from isthmus.sandbox.layout import STOCK_NEUTRON

    extra: dict[str, Any] = {}
    if region == STOCK_NEUTRON:
        region, extra = CENTRAL_REGION, {"network_endpoint_override": layout.url(layout.stock_neutron_port)}
    return openstack.connect(
        auth_url=layout.auth_url, username="admin", password=PASSWORD, project_name="admin",
        user_domain_name="Default", project_domain_name="Default", region_name=region,
        identity_interface="public", **extra,
    )


def register(layout: Layout, cache: SchemaCache | None = None, loaded: bool = False) -> None:
    """Regions, projects, users, roles, services and endpoints, as devstack
    registers them; ``loaded``: ``prepare`` loaded them from the cache already
    (then only the admin's login is checked). What it registers is kept in the
    cache for the next sandbox of the same shape."""
    conn = runtime.retry(lambda: _authenticated(layout), "authenticating to keystone")
    if loaded:
        # One policy-checked call before any service validates a token: Keystone
        # loads its policy rules on the first check, and a check made while
        # another thread loads them is refused (a 403 to a service's token).
        list(conn.identity.regions())
        return
    _register(layout, conn.identity)
    if cache is not None:
        cache.store("keystone catalogue", catalog_entry(layout), SQLiteFile(layout.sqlite_path("keystone")).save,
                    "registered")


def _register(layout: Layout, ident) -> None:
    for region in layout.regions:
        if not ident.find_region(region):
            ident.create_region(id=region)
    default = ident.find_domain("Default")
    roles = {name: _ensure_role(ident, name) for name in ("admin", "member", "reader", "service")}
    service_project = _ensure_project(ident, "service", default.id)
    for name in SERVICE_USERS:
        user = _ensure_user(ident, name, default.id)
        for role in ("admin", "service"):
            ident.assign_project_role_to_user(service_project, user, roles[role])
    demo_project = _ensure_project(ident, "demo", default.id)
    demo = _ensure_user(ident, "demo", default.id)
    ident.assign_project_role_to_user(demo_project, demo, roles["member"])
    admin = ident.find_user("admin", domain_id=default.id)
    ident.assign_project_role_to_user(demo_project, admin, roles["admin"])
    services: dict[str, Any] = {}
    for entry in catalog(layout):
        if entry.type not in services:
            services[entry.type] = (ident.find_service(entry.name, ignore_missing=True)
                                    or ident.create_service(name=entry.name, type=entry.type))
        for interface in CATALOG_INTERFACES:
            ident.create_endpoint(service_id=services[entry.type].id, interface=interface, url=entry.url,
                                  region_id=entry.region)


def _authenticated(layout: Layout):
    conn = admin_connection(layout)
    conn.authorize()
    return conn


def _ensure_role(ident, name):
    return ident.find_role(name) or ident.create_role(name=name)


def _ensure_project(ident, name, domain_id):
    return ident.find_project(name, domain_id=domain_id) or ident.create_project(name=name, domain_id=domain_id)


def _ensure_user(ident, name, domain_id):
    return ident.find_user(name, domain_id=domain_id) or ident.create_user(
        name=name, password=PASSWORD, domain_id=domain_id, default_project_id=None)
