"""Placement, one per region."""

from __future__ import annotations

from pathlib import Path

from isthmus.sandbox import config_files, database, process, runtime
from isthmus.sandbox.layout import PASSWORD, Layout
from isthmus.sandbox.schema_cache import SchemaCache


def _dir(layout: Layout, region: str) -> Path:
    return layout.etc / f"placement-{region}"


def prepare(layout: Layout, region: str, cache: SchemaCache | None = None) -> None:
    conf = _dir(layout, region) / "placement.conf"
    config_files.write(conf, {
        "DEFAULT": {"debug": False},
        "api": {"auth_strategy": "keystone"},
        "placement_database": {"connection": database.url(layout, f"placement_{region.lower()}")},
        "keystone_authtoken": config_files.keystone_authtoken(layout.auth_url, "placement", PASSWORD, region),
    })
    database.provide(layout, cache or SchemaCache(None), f"placement-{region}", "placement",
                     [f"placement_{region.lower()}"],
                     lambda: process.run([runtime.tool("placement-manage"), "--config-file", str(conf), "db", "sync"],
                                         layout.logs / f"placement-{region}-setup.log",
                                         what=f"placement-{region} db sync"))


def start(layout: Layout, region: str) -> process.ServiceRecord:
    env = {"OS_PLACEMENT_CONFIG_DIR": str(_dir(layout, region))}
    return runtime.start_wsgi(layout, f"placement-{region}", "placement", layout.region_port(region, "placement"), env)
