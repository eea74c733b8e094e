"""Cinder per region: API (gunicorn), scheduler and a volume service whose backend
needs no disk (cinder's own FakeLoggingVolumeDriver: an LVM driver that logs the
commands instead of running them). Volumes are records with a real lifecycle
(create, extend, delete, attach bookkeeping); no data path.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid

from isthmus.configs import compute
from isthmus.configs.ini import overlay
from isthmus.sandbox import config_files, database, process, runtime
from isthmus.sandbox.layout import Layout
from isthmus.sandbox.regional import RegionalService
from isthmus.sandbox.schema_cache import SchemaCache

BACKEND = "fake"
DRIVER = "cinder.tests.fake_driver.FakeLoggingVolumeDriver"
CONF_ENV = "ISTHMUS_CINDER_CONF"
# What cinder's migrations create (random ids): the default volume type and group type.
DEFAULT_VOLUME_TYPE = "__DEFAULT__"
DEFAULT_GROUP_TYPE = "default_cgsnapshot_type"


def _service(layout: Layout, region: str) -> RegionalService:
    return RegionalService(layout, "cinder", region)


def write_config(layout: Layout, region: str) -> None:
    service = _service(layout, region)
    state = service.state
    shared = compute.cinder_conf(compute.CinderValues(
        transport_url=service.transport_url(), database_connection=service.database_url(),
        service_user=service.service_user(),
        availability_zone=layout.availability_zone(region), state_path=str(state), lock_path=str(state / "lock"),
        nova_interface="public"))
    # One machine, no disk: the sandbox's tuning on top of what the operator renders too.
    config_files.write(service.conf, overlay(shared, {
        "DEFAULT": {
            "host": f"{region.lower()}-cinder",
            "my_ip": "127.0.0.1",
            "enabled_backends": BACKEND,
            "api_paste_config": service.etc / "api-paste.ini",
            # Which filters list calls accept (without it, even ?name= is refused).
            "resource_query_filters_file": runtime.VENV_ETC / "cinder" / "resource_filters.json",
            # Like Nova's: tests and demos share one project; default quotas (10 volumes) stop them.
            "quota_volumes": -1,
            "quota_snapshots": -1,
            "quota_gigabytes": -1,
            "quota_backups": -1,
            "quota_backup_gigabytes": -1,
        },
        BACKEND: {"volume_driver": DRIVER, "volume_backend_name": BACKEND},
        "coordination": {"backend_url": f"file://{state / 'coordination'}"},
    }))


def prepare(layout: Layout, region: str, cache: SchemaCache | None = None) -> None:
    write_config(layout, region)
    service = _service(layout, region)
    shutil.copy(runtime.VENV_ETC / "cinder" / "api-paste.ini", service.etc / "api-paste.ini")
    for sub in ("lock", "coordination"):
        (service.state / sub).mkdir(parents=True, exist_ok=True)
    name = service.database_name()
    database.provide(
        layout, cache or SchemaCache(None), f"cinder-{region}", "cinder", [name],
        lambda: process.run([runtime.tool("cinder-manage"), "--config-file", str(service.conf), "db", "sync"],
                            layout.logs / f"cinder-{region}-setup.log", what=f"cinder-{region} db sync"),
        after_load=lambda: fresh_default_type_ids(layout, name))


def fresh_default_type_ids(layout: Layout, name: str) -> None:
    """The migrations create the default volume type and group type with random
    ids; a loaded dump would give every region (and sandbox) the same ones, so
    give them new ones, as a migration would."""
    statements: list[tuple[str, dict[str, str]]] = [("SET FOREIGN_KEY_CHECKS = 0", {})]
    for table, specs, column, type_name in (
            ("volume_types", "volume_type_extra_specs", "volume_type_id", DEFAULT_VOLUME_TYPE),
            ("group_types", "group_type_specs", "group_type_id", DEFAULT_GROUP_TYPE)):
        fresh = {"id": str(uuid.uuid4()), "name": type_name}
        statements += [
            (f"SET @old = (SELECT id FROM {table} WHERE name = :name)", fresh),
            (f"UPDATE {table} SET id = :id WHERE id = @old", fresh),
            (f"UPDATE {specs} SET {column} = :id WHERE {column} = @old", fresh),
        ]
    database.execute(layout, name, [*statements, ("SET FOREIGN_KEY_CHECKS = 1", {})])


def wsgi_app():
    """gunicorn factory: cinder parses sys.argv with oslo.config when the app is built."""
    sys.argv = ["cinder-api", "--config-file", os.environ[CONF_ENV]]
    from cinder.wsgi import api

    return api.application


def start_api(layout: Layout, region: str) -> process.ServiceRecord:
    port = layout.region_port(region, "cinder")
    name = f"cinder-api-{region}"
    return runtime.start_wsgi(layout, name, "isthmus.sandbox.cinder:wsgi_app", port,
                              {CONF_ENV: str(_service(layout, region).conf)})


def start_control(layout: Layout, region: str) -> list[process.ServiceRecord]:
    conf = ["--config-file", str(_service(layout, region).conf)]
    return [runtime.start_daemon(layout, f"cinder-{svc}-{region}", [runtime.tool(f"cinder-{svc}"), *conf])
            for svc in ("scheduler", "volume")]


def wait_volume_service(layout: Layout, region: str, conn, records, timeout: float = 300) -> None:
    """The backend reports up (the scheduler has capacity for it)."""
    def up() -> bool:
        try:
            return any(s.binary == "cinder-volume" and s.state == "up" for s in conn.block_storage.services())
        except Exception:  # noqa: BLE001 - API not ready yet
            return False

    process.wait_until(up, f"waiting for cinder-volume in {region} to report", timeout, records[-1])
