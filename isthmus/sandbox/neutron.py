"""Neutron servers: one in CentralRegion, one per region (config: isthmus.configs.neutron)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from isthmus.configs import neutron as render_neutron
from isthmus.configs.ini import ISTHMUS_USER, ServiceUser
from isthmus.configs.neutron import CENTRAL, LOCAL, PLAIN, NeutronValues, OvnValues
from isthmus.sandbox import config_files, process, runtime
from isthmus.sandbox.dataplane.names import tunnel_ip
from isthmus.sandbox.layout import CENTRAL_REGION, PASSWORD, STOCK_NEUTRON, Layout
from isthmus.sandbox.nova import compute_host
from isthmus.sandbox.schema_cache import SchemaCache, provide_sqlite


def _dir(layout: Layout, region: str) -> Path:
    return layout.etc / f"neutron-{region}"


def _files(layout: Layout, region: str) -> list[Path]:
    return [_dir(layout, region) / "neutron.conf", _dir(layout, region) / "ml2_conf.ini"]


def values(layout: Layout, region: str) -> NeutronValues:
    """The renderer's inputs for one of the sandbox's Neutron servers.

    Central runs the Isthmus central plugin; it binds ports as the regions report
    them. Regions run the local plugin, with the sandbox-only binder standing in
    for real agents. ``--plain`` runs stock ML2 everywhere."""
    role = PLAIN if layout.plain or region == STOCK_NEUTRON else CENTRAL if region == CENTRAL_REGION else LOCAL
    return NeutronValues(
        role=role,
        region=region,
        central_region=CENTRAL_REGION,
        service_user=ServiceUser(layout.auth_url, "neutron", PASSWORD, _catalog_region(region)),
        database_connection=_database_url(layout, region),
        transport_url=_transport_url(layout, region),
        central_client=ServiceUser(layout.auth_url, ISTHMUS_USER, PASSWORD, region) if role == LOCAL else None,
        isthmus_database_connection=layout.isthmus_db_url if role == CENTRAL else None,
        availability_zone=layout.availability_zone(region) if role == LOCAL else "",
        **_ml2(layout, region),
        vni_ranges=_vni_range(layout, region),
        host=f"neutron-{region}",
        state_path=str(layout.data / f"neutron-{region}"),
        lock_path=str(layout.data / f"neutron-{region}" / "lock"),
        api_paste_config=str(runtime.VENV_ETC / "neutron" / "api-paste.ini"),
        pagination_max_limit=layout.neutron_page_limit or -1,
        agentless=True,
        unlimited_quotas=True,
        extra_ml2_sections=_sandbox_agent(layout, region),
    )


def _database_url(layout: Layout, region: str) -> str:
    """SQLite, except in an OVN region or with ``--neutron-db mariadb``. In an OVN
    region ML2/OVN's Southbound event threads write to the database (port status,
    hash ring) while an API request holds SQLite's one write lock and waits for
    the Northbound; the region locked up for minutes. There the database lives on
    the sandbox's MariaDB, as in a real region."""
    if layout.neutron_on_mariadb(region):
        from isthmus.sandbox import database

        return database.url(layout, database.neutron_database(region))
    return layout.sqlite_url(f"neutron-{region}")


def _ml2(layout: Layout, region: str) -> dict[str, Any]:
    """An OVN region binds through ML2/OVN (its chassis is real); the binder
    stays loaded there only to wake the dataplane agent, which plugs servers."""
    if not layout.is_ovn(region):
        return {"mechanism_drivers": "isthmus_sandbox_binder"}
    from isthmus.sandbox import ovn

    return {"mechanism_drivers": "ovn,isthmus_sandbox_binder", "type_drivers": "flat,vlan,vxlan,geneve",
            "tenant_network_types": "geneve",
            "ovn": OvnValues(ovn.nb_connection(layout, region), ovn.sb_connection(layout, region))}


def write_config(layout: Layout, region: str) -> None:
    conf_dir = _dir(layout, region)
    rendered = values(layout, region)
    config_files.write(conf_dir / "neutron.conf", render_neutron.neutron_conf(rendered))
    config_files.write(conf_dir / "ml2_conf.ini", render_neutron.ml2_conf(rendered))


def _catalog_region(region: str) -> str:
    """The stock Neutron is in no catalogue; it finds Keystone as central does."""
    return CENTRAL_REGION if region == STOCK_NEUTRON else region


def _vni_range(layout: Layout, region: str) -> str:
    """Central (and the stock Neutron, its own database) 1:99999; region i
    (1-based) 100000*i : 100000*i+99999."""
    index = 0 if region in (CENTRAL_REGION, STOCK_NEUTRON) else layout.regions.index(region) + 1
    return f"{100000 * index or 1}:{100000 * index + 99999}"


def _sandbox_agent(layout: Layout, region: str) -> dict:
    """The OVS agent row the sandbox binder keeps for the region's compute host
    (see ml2_binder); its tunnel IP is the host's underlay address (with
    ``--dataplane`` a real one, which the dataplane agents tunnel to)."""
    if region in (CENTRAL_REGION, STOCK_NEUTRON) or not layout.compute:
        return {}
    section: dict[str, Any] = {"agent_host": compute_host(region), "agent_tunnel_ip": tunnel_ip(layout, region)}
    if layout.is_ovn(region):
        section = {"bind_ports": False}  # ML2/OVN binds; its chassis is the agent
    if layout.dataplane:
        from isthmus.sandbox.dataplane.host import wakeup_socket

        section["dataplane_socket"] = wakeup_socket(layout, region)
    return {"isthmus_sandbox": section}


def _transport_url(layout: Layout, region: str) -> str:
    """Neutron casts agent notifications even with no agents; a broker must exist.

    Without compute we have no vhost, so use a fake transport (no broker needed);
    the stock Neutron has no agents or Nova either."""
    if not layout.compute or region == STOCK_NEUTRON:
        return "fake:/"
    from isthmus.sandbox import rabbitmq

    return rabbitmq.transport_url(layout, region)


def env(layout: Layout, region: str) -> dict[str, str]:
    values = {
        "OS_NEUTRON_CONFIG_DIR": str(_dir(layout, region)),
        "OS_NEUTRON_CONFIG_FILES": ";".join(p.name for p in _files(layout, region)),
    }
    if layout.is_ovn(region):
        from isthmus.sandbox import ovn

        # ML2/OVN runs ovsdb-client by name; its hash ring asks how many API
        # workers run, which it knows under uWSGI and mod_wsgi, else from
        # ASGI_WORKERS (gunicorn: one worker, runtime.start_wsgi).
        values["PATH"] = f"{ovn.bin_dir(layout)}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        values["ASGI_WORKERS"] = "1"
    return values


def prepare(layout: Layout, region: str, cache: SchemaCache | None = None) -> None:
    """Create the schema. Neutron's migrations cannot ALTER on SQLite, so build
    the schema from the models and stamp alembic's heads, as SQLite allows.
    Every Neutron server (central, regions, stock) gets the same schema: one
    cache entry for all."""
    write_config(layout, region)
    (layout.data / f"neutron-{region}" / "lock").mkdir(parents=True, exist_ok=True)
    log = layout.logs / f"neutron-{region}-setup.log"
    url = _database_url(layout, region)
    conf_args = [arg for path in _files(layout, region) for arg in ("--config-file", str(path))]

    def migrate() -> None:
        process.run([sys.executable, "-m", "isthmus.sandbox.neutron_schema", url], log, what=f"neutron-{region} schema")
        process.run([runtime.tool("neutron-db-manage"), *conf_args, "stamp", "heads"], log,
                    what=f"neutron-{region} stamp")

    if layout.neutron_on_mariadb(region):
        from isthmus.sandbox import database

        database.provide(layout, cache or SchemaCache(None), f"neutron-{region}", "neutron",
                         [database.neutron_database(region)], migrate)
        return

    provide_sqlite(cache or SchemaCache(None), f"neutron-{region}", "neutron.sqlite",
                   layout.sqlite_path(f"neutron-{region}"), migrate)


def start(layout: Layout, region: str) -> process.ServiceRecord:
    return runtime.start_wsgi(layout, f"neutron-{region}", "neutron", layout.neutron_port(region), env(layout, region))


def ovn_db_sync(layout: Layout, region: str, mode: str = "repair") -> str:
    """Run ML2/OVN's ``neutron-ovn-db-sync-util`` once (what an operator runs after
    a restore, and what the maintenance worker runs at start). The sandbox runs no
    maintenance worker: it was left out while the region's database was SQLite,
    where a second process locked the API out; on MariaDB it is not tried yet.
    Returns its log."""
    # The tool accepts only ML2 as core plugin: the local plugin is ML2 with
    # Isthmus' calls to central on top, over the same database, so ML2 reads it.
    override = config_files.write(_dir(layout, region) / "db-sync.conf", {"DEFAULT": {"core_plugin": "ml2"}})
    conf_args = [arg for path in [*_files(layout, region), override] for arg in ("--config-file", str(path))]
    log = layout.logs / f"neutron-ovn-db-sync-{region}.log"
    offset = log.stat().st_size if log.exists() else 0
    process.run([runtime.tool("neutron-ovn-db-sync-util"), *conf_args, "--ovn-neutron_sync_mode", mode], log,
                env=env(layout, region), what=f"neutron-ovn-db-sync-util ({region})")
    return log.read_text()[offset:]


# Neutron's documented legacy defaults: every group may send anywhere; a default
# group also admits its own members. A real deployment gets these from a schema
# migration; the sandbox builds its SQLite schema from the models, so it writes
# them through the admin API (security-groups-default-rules) before any project
# has a default group.
DEFAULT_RULE_TEMPLATES = [
    {"direction": "egress", "ethertype": "IPv4", "used_in_default_sg": True, "used_in_non_default_sg": True},
    {"direction": "egress", "ethertype": "IPv6", "used_in_default_sg": True, "used_in_non_default_sg": True},
    {"direction": "ingress", "ethertype": "IPv4", "remote_group_id": "PARENT", "used_in_default_sg": True,
     "used_in_non_default_sg": False},
    {"direction": "ingress", "ethertype": "IPv6", "remote_group_id": "PARENT", "used_in_default_sg": True,
     "used_in_non_default_sg": False},
]


def seed_default_rules(conn) -> None:
    """Idempotent: only when the region has no templates at all."""
    existing = conn.network.get("/default-security-group-rules", raise_exc=True).json()
    if existing.get("default_security_group_rules"):
        return
    for template in DEFAULT_RULE_TEMPLATES:
        conn.network.post("/default-security-group-rules", json={"default_security_group_rule": template},
                          raise_exc=True)
