"""Octavia per region (``sandbox up --octavia``): octavia-api (gunicorn) and
octavia-worker from PyPI, the amphora provider with the no-op compute, network,
amphora, image and volume drivers. Load balancers run Octavia's real flows
(database, RPC, task graph) and reach ACTIVE without VMs; no packet is balanced.

Why the amphora provider and not the ``noop_driver`` provider: the latter only
logs the calls, so nothing ever moves a load balancer out of PENDING_CREATE.

The no-op network driver allocates every VIP at 198.51.100.1 unless the request
names an address; it never touches the region's Neutron.
"""

from __future__ import annotations

import datetime
import os
import sys
from pathlib import Path

from isthmus.configs.ini import keystone_authtoken, service_client
from isthmus.sandbox import config_files, database, process, runtime
from isthmus.sandbox.layout import Layout
from isthmus.sandbox.regional import RegionalService
from isthmus.sandbox.schema_cache import SchemaCache

CONF_ENV = "ISTHMUS_OCTAVIA_CONF"
PROVIDER = "amphora"
# Octavia encrypts each amphora's certificate with the first of these (32 URL-safe
# characters); the sandbox's amphorae are no-op records, the key guards nothing.
SERVER_CERTS_KEY = "isthmus-sandbox-amphora-certs-00"


def _service(layout: Layout, region: str) -> RegionalService:
    return RegionalService(layout, "octavia", region)


def write_config(layout: Layout, region: str) -> None:
    service = _service(layout, region)
    certs = service.etc / "ca"
    config_files.write(service.conf, {
        "DEFAULT": {"transport_url": service.transport_url(), "debug": False},
        "api_settings": {
            "auth_strategy": "keystone",
            "enabled_provider_drivers": f"{PROVIDER}:Octavia's amphora flows with no-op drivers (sandbox)",
            "default_provider_driver": PROVIDER,
            "api_base_uri": layout.url(layout.region_port(region, "octavia")),
        },
        "database": {"connection": service.database_url()},
        "keystone_authtoken": keystone_authtoken(service.service_user()),
        "service_auth": service_client(service.service_user()),
        "controller_worker": {
            "amphora_driver": "amphora_noop_driver",
            "compute_driver": "compute_noop_driver",
            "network_driver": "network_noop_driver",
            "image_driver": "image_noop_driver",
            "volume_driver": "volume_noop_driver",
            "loadbalancer_topology": "SINGLE",
            # Read into every amphora's user data, even a no-op one's.
            "client_ca": certs / "ca.pem",
            "workers": 1,
        },
        "certificates": {
            "cert_generator": "local_cert_generator",
            "ca_certificate": certs / "ca.pem",
            "ca_private_key": certs / "ca.key",
            "server_certs_key_passphrase": SERVER_CERTS_KEY,
        },
        # Without a jobboard the worker runs each flow itself (no Redis/ZooKeeper).
        "task_flow": {"jobboard_enabled": False},
        "oslo_messaging": {"topic": "octavia_prov"},
        "oslo_concurrency": {"lock_path": service.state / "lock"},
        "oslo_messaging_notifications": {"driver": "noop"},
        "health_manager": {"heartbeat_key": "isthmus-sandbox"},
    })


def _write_ca(directory: Path) -> None:
    """The CA Octavia signs amphora certificates with (local_cert_generator)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    if (directory / "ca.pem").exists():
        return
    directory.mkdir(parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "isthmus sandbox octavia CA")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    (directory / "ca.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))
    (directory / "ca.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def prepare(layout: Layout, region: str, cache: SchemaCache | None = None) -> None:
    write_config(layout, region)
    service = _service(layout, region)
    _write_ca(service.etc / "ca")
    (service.state / "lock").mkdir(parents=True, exist_ok=True)
    database.provide(layout, cache or SchemaCache(None), f"octavia-{region}", "octavia", [service.database_name()],
                     lambda: process.run([runtime.tool("octavia-db-manage"), "--config-file",
                                          str(service.conf), "upgrade", "head"],
                                         layout.logs / f"octavia-{region}-setup.log",
                                         what=f"octavia-{region} db upgrade"))


def wsgi_app():
    """gunicorn factory: Octavia reads its configuration from argv when the app is built."""
    argv = ["octavia-api", "--config-file", os.environ[CONF_ENV]]
    sys.argv = argv
    from octavia.api import app

    return app.setup_app(argv=argv)


def start_api(layout: Layout, region: str) -> process.ServiceRecord:
    port = layout.region_port(region, "octavia")
    return runtime.start_wsgi(layout, f"octavia-api-{region}", "isthmus.sandbox.octavia:wsgi_app", port,
                              {CONF_ENV: str(_service(layout, region).conf)})


def start_worker(layout: Layout, region: str) -> process.ServiceRecord:
    return runtime.start_daemon(layout, f"octavia-worker-{region}",
                                [runtime.tool("octavia-worker"), "--config-file", str(_service(layout, region).conf)])
