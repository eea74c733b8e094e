"""The machine's RabbitMQ, with one vhost per sandbox region (Nova needs a broker)."""

from __future__ import annotations

import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

from isthmus.sandbox import process
from isthmus.sandbox.layout import CENTRAL_REGION, Layout

HOST, PORT, USER, PASSWORD = "127.0.0.1", 5672, "guest", "guest"
INSTALL_HINT = "apt-get install -y rabbitmq-server && rabbitmq-server -detached"


def transport_url(layout: Layout, region: str) -> str:
    return f"rabbit://{USER}:{PASSWORD}@{HOST}:{PORT}/{layout.rabbit_vhost(region)}"


def _ctl(*args: str, check: bool = True) -> str:
    result = subprocess.run(["rabbitmqctl", "-q", *args], capture_output=True, text=True, timeout=60)
    if check and result.returncode != 0:
        raise process.SandboxError(f"rabbitmqctl {' '.join(args)} failed: "
                                   f"{result.stderr.strip() or result.stdout.strip()}")
    return result.stdout


def ensure_running() -> None:
    if process.port_is_listening(PORT):
        return
    if not shutil.which("rabbitmq-server"):
        raise process.SandboxError(f"RabbitMQ is not installed and nothing listens on {HOST}:{PORT}; "
                                   f"run: {INSTALL_HINT}")
    subprocess.run(["rabbitmq-server", "-detached"], check=False, capture_output=True)
    process.wait_until(lambda: process.port_is_listening(PORT), f"waiting for RabbitMQ on {HOST}:{PORT}", 60)


def create_vhosts(layout: Layout) -> None:
    ensure_running()
    if not shutil.which("rabbitmqctl"):
        raise process.SandboxError(f"rabbitmqctl not found; run: {INSTALL_HINT}")
    regions = (CENTRAL_REGION, *layout.regions)
    # Every rabbitmqctl run boots an Erlang node (most of a second of CPU): one
    # import of definitions makes all the vhosts and permissions at once.
    definitions = {
        "vhosts": [{"name": layout.rabbit_vhost(region)} for region in regions],
        "permissions": [{"user": USER, "vhost": layout.rabbit_vhost(region), "configure": ".*", "write": ".*",
                         "read": ".*"} for region in regions],
    }
    result = subprocess.run(["rabbitmqctl", "-q", "import_definitions", "-"], input=json.dumps(definitions),
                            capture_output=True, text=True, timeout=60)
    if result.returncode == 0:
        return

    def create(region: str) -> None:  # a RabbitMQ older than import_definitions (3.8.2)
        vhost = layout.rabbit_vhost(region)
        _ctl("add_vhost", vhost, check=False)  # exists already: fine
        _ctl("set_permissions", "-p", vhost, USER, ".*", ".*", ".*")

    with ThreadPoolExecutor(max_workers=len(regions)) as pool:
        list(pool.map(create, regions))


def delete_vhosts(layout: Layout) -> None:
    if not shutil.which("rabbitmqctl") or not process.port_is_listening(PORT):
        return
    regions = (CENTRAL_REGION, *layout.regions)
    with ThreadPoolExecutor(max_workers=len(regions)) as pool:
        list(pool.map(lambda region: _ctl("delete_vhost", layout.rabbit_vhost(region), check=False), regions))


def consumers(layout: Layout, region: str, queue: str) -> int:
    """How many consumers ``queue`` has on the region's vhost (0 while it does not exist)."""
    import amqp

    conn = amqp.Connection(host=f"{HOST}:{PORT}", userid=USER, password=PASSWORD,
                           virtual_host=layout.rabbit_vhost(region), connect_timeout=2)
    try:
        conn.connect()
        try:
            _, _, count = conn.channel().queue_declare(queue, passive=True)
        except amqp.exceptions.NotFound:
            return 0
        return count
    finally:
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - a passive declare that failed closed the channel already
            pass
