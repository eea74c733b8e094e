"""The machine's RabbitMQ, with one vhost per sandbox region (Nova needs a broker)."""

from __future__ import annotations

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
        raise process.SandboxError(f"rabbitmqctl {' '.join(args)} failed: {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout


def ensure_running() -> None:
    if process.port_is_listening(PORT):
        return
    if not shutil.which("rabbitmq-server"):
        raise process.SandboxError(f"RabbitMQ is not installed and nothing listens on {HOST}:{PORT}; run: {INSTALL_HINT}")
    subprocess.run(["rabbitmq-server", "-detached"], check=False, capture_output=True)
    process.wait_until(lambda: process.port_is_listening(PORT), f"waiting for RabbitMQ on {HOST}:{PORT}", 60)


def create_vhosts(layout: Layout) -> None:
    ensure_running()
    if not shutil.which("rabbitmqctl"):
        raise process.SandboxError(f"rabbitmqctl not found; run: {INSTALL_HINT}")

    def create(region: str) -> None:
        vhost = layout.rabbit_vhost(region)
        _ctl("add_vhost", vhost, check=False)  # exists already: fine
        _ctl("set_permissions", "-p", vhost, USER, ".*", ".*", ".*")

    # Each rabbitmqctl run boots an Erlang node (about a second): the regions' in parallel.
    regions = (CENTRAL_REGION, *layout.regions)
    with ThreadPoolExecutor(max_workers=len(regions)) as pool:
        list(pool.map(create, regions))


def delete_vhosts(layout: Layout) -> None:
    if not shutil.which("rabbitmqctl") or not process.port_is_listening(PORT):
        return
    regions = (CENTRAL_REGION, *layout.regions)
    with ThreadPoolExecutor(max_workers=len(regions)) as pool:
        list(pool.map(lambda region: _ctl("delete_vhost", layout.rabbit_vhost(region), check=False), regions))
