"""isthmus-gateway in the sandbox: CentralRegion's one compute (and volume) endpoint.

Images: CentralRegion's ``image`` endpoint is the master region's Glance (the first
region); the gateway copies an image into another region, with the same UUID, the
first time a server boots from it there (see docs/gateway.md, "Images").
"""

from __future__ import annotations

import sys
from pathlib import Path

from isthmus.configs.ini import ISTHMUS_USER, ServiceUser
from isthmus.configs.services import GatewayValues, gateway_conf
from isthmus.sandbox import config_files, process
from isthmus.sandbox.layout import CENTRAL_REGION, PASSWORD, Layout


def config_path(layout: Layout) -> Path:
    return layout.etc / "isthmus" / "gateway.conf"


def compute_url(layout: Layout) -> str:
    return layout.isthmus_url(layout.gateway_port, "/compute/v2.1")


def volume_url(layout: Layout) -> str:
    return layout.isthmus_url(layout.gateway_port, "/volume/v3")


def master_region(layout: Layout) -> str:
    return layout.regions[0]


def values(layout: Layout) -> GatewayValues:
    return GatewayValues(
        bind_host="127.0.0.1", bind_port=layout.gateway_port, public_url=layout.isthmus_url(layout.gateway_port),
        central_region=CENTRAL_REGION, master_region=master_region(layout),
        database_connection=layout.isthmus_db_url,
        service_user=ServiceUser(layout.auth_url, ISTHMUS_USER, PASSWORD, CENTRAL_REGION),
        list_timeout=10, catalog_ttl=60, interface="public", tls=layout.tls_files(),
        placement_policy="fewest_projects",  # written out as the operator does (its CRD default)
    )


def write_config(layout: Layout) -> Path:
    return config_files.write(config_path(layout), gateway_conf(values(layout)))


def config_dir(layout: Layout) -> Path:
    """Operator overrides (``*.conf``), read after gateway.conf, kept across restarts
    (``isthmus sandbox restart isthmus-gateway`` rewrites gateway.conf only)."""
    return layout.etc / "isthmus" / "gateway.conf.d"


def start(layout: Layout) -> process.ServiceRecord:
    conf = write_config(layout)
    config_dir(layout).mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "isthmus.gateway.service", "--config-file", str(conf),
            "--config-dir", str(config_dir(layout))]
    return process.start("isthmus-gateway", argv, log=layout.logs / "isthmus-gateway.log", run_dir=layout.run,
                         port=layout.gateway_port, url=layout.isthmus_url(layout.gateway_port, "/"),
                         ca=layout.ca_file)
