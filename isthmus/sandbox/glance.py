"""Glance, one per region, file store, with a public image named ``tiny``."""

from __future__ import annotations

import shutil
from pathlib import Path

from isthmus.sandbox import config_files, process, runtime
from isthmus.sandbox.layout import PASSWORD, Layout
from isthmus.sandbox.schema_cache import SchemaCache, provide_sqlite

TINY_IMAGE = "tiny"
# The same UUID in every region: images are replicated with their UUID (see isthmus/gateway/images.py).
TINY_IMAGE_ID = "4d0b6a4e-5e0c-5b1a-9a57-1c7a7f0e0002"


def _dir(layout: Layout, region: str) -> Path:
    return layout.etc / f"glance-{region}"


def prepare(layout: Layout, region: str, cache: SchemaCache | None = None) -> None:
    conf_dir = _dir(layout, region)
    store = layout.data / f"glance-{region}"
    for sub in ("images", "staging", "tasks"):
        (store / sub).mkdir(parents=True, exist_ok=True)
    conf_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(runtime.VENV_ETC / "glance" / "glance-api-paste.ini", conf_dir / "glance-api-paste.ini")
    config_files.write(conf_dir / "glance-api.conf", {
        "DEFAULT": {"enabled_backends": "fs:file", "debug": False},
        "glance_store": {"default_backend": "fs"},
        "fs": {"filesystem_store_datadir": store / "images"},
        "os_glance_staging_store": {"filesystem_store_datadir": store / "staging"},
        "os_glance_tasks_store": {"filesystem_store_datadir": store / "tasks"},
        "database": {"connection": layout.sqlite_url(f"glance-{region}")},
        "keystone_authtoken": config_files.keystone_authtoken(layout.auth_url, "glance", PASSWORD, region),
        "paste_deploy": {"flavor": "keystone"},
        "oslo_concurrency": {"lock_path": store / "lock"},
    })
    provide_sqlite(cache or SchemaCache(None), f"glance-{region}", "glance.sqlite",
                   layout.sqlite_path(f"glance-{region}"),
                   lambda: process.run([runtime.tool("glance-manage"), "--config-dir", str(conf_dir), "db_sync"],
                                       layout.logs / f"glance-{region}-setup.log", what=f"glance-{region} db_sync"))


def start(layout: Layout, region: str) -> process.ServiceRecord:
    env = {"OS_GLANCE_CONFIG_DIR": str(_dir(layout, region))}
    return runtime.start_wsgi(layout, f"glance-{region}", "glance", layout.region_port(region, "glance"), env)


def ensure_tiny_image(conn) -> None:
    """A few bytes are enough: the fake virt driver never reads the image."""
    if conn.image.find_image(TINY_IMAGE):
        return
    conn.image.create_image(
        name=TINY_IMAGE, id=TINY_IMAGE_ID, data=b"isthmus-sandbox-tiny-image\n" * 40, disk_format="raw",
        container_format="bare", visibility="public", min_disk=0, min_ram=0,
    )
