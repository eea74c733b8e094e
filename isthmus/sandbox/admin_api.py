"""The Isthmus Admin API of the sandbox: service type ``multiregion`` in CentralRegion.

Served by gunicorn like the OpenStack APIs (``isthmus.sandbox.wsgi:isthmus_admin``),
configured by ``STATE/etc/isthmus/admin-api.conf`` and the ``*.conf`` files of
``admin-api.conf.d`` beside it; a ``policy.yaml`` dropped next to it overrides
policy defaults. It validates tokens as the ``isthmus`` service
user and shares the Isthmus database with ``isthmus-xjob``.
"""

from __future__ import annotations

from pathlib import Path

from isthmus.configs.ini import ISTHMUS_USER, ServiceUser
from isthmus.configs.services import AdminAPIValues, admin_api_conf
from isthmus.sandbox import config_files, process, runtime
from isthmus.sandbox.layout import CENTRAL_REGION, PASSWORD, Layout

NAME = "isthmus-admin"


def config_path(layout: Layout) -> Path:
    return layout.etc / "isthmus" / "admin-api.conf"


def values(layout: Layout) -> AdminAPIValues:
    return AdminAPIValues(bind_host="127.0.0.1", bind_port=layout.admin_api_port,
                          database_connection=layout.isthmus_db_url,
                          service_user=ServiceUser(layout.auth_url, ISTHMUS_USER, PASSWORD, CENTRAL_REGION),
                          tls=layout.tls_files())


def write_config(layout: Layout) -> Path:
    return config_files.write(config_path(layout), admin_api_conf(values(layout)))


def config_dir(layout: Layout) -> Path:
    """Operator overrides (``*.conf``), read after admin-api.conf in name order and
    kept across restarts (``sandbox restart isthmus-admin`` rewrites admin-api.conf only)."""
    return layout.etc / "isthmus" / "admin-api.conf.d"


def start(layout: Layout) -> process.ServiceRecord:
    conf = write_config(layout)
    config_dir(layout).mkdir(parents=True, exist_ok=True)
    files = [conf, *sorted(config_dir(layout).glob("*.conf"))]
    return runtime.start_wsgi(layout, NAME, "isthmus_admin", layout.admin_api_port,
                              {"OS_ISTHMUS_CONFIG_FILES": ";".join(map(str, files))}, threads=4, health_path="/",
                              tls=layout.tls_files())
