"""Nova per region: API, conductor, scheduler and one fake-driver compute host."""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

from isthmus.configs import compute
from isthmus.configs.ini import overlay
from isthmus.sandbox import config_files, database, process, rabbitmq, runtime
from isthmus.sandbox.layout import Layout
from isthmus.sandbox.process import pid_alive
from isthmus.sandbox.regional import RegionalService
from isthmus.sandbox.schema_cache import SchemaCache

FLAVOR = "m1.tiny"
FLAVOR_ID = "4d0b6a4e-5e0c-5b1a-9a57-1c7a7f0e0001"
# A second, larger flavor: resize and flavor-filter tests (Tempest's flavor_ref_alt) need two.
FLAVOR_ALT = "m1.small"
FLAVOR_ALT_ID = "4d0b6a4e-5e0c-5b1a-9a57-1c7a7f0e0002"
CELL0_UUID = "00000000-0000-0000-0000-000000000000"  # nova's CellMapping.CELL0_UUID
HOST_MAPPING_WAIT = 20  # seconds; the scheduler looks every 2


def compute_host(region: str) -> str:
    return f"{region.lower()}-compute"


def _service(layout: Layout, region: str) -> RegionalService:
    return RegionalService(layout, "nova", region)


def write_config(layout: Layout, region: str) -> None:
    service = _service(layout, region)
    state = service.state
    shared = compute.nova_conf(compute.NovaValues(
        transport_url=service.transport_url(), database_connection=service.database_url(),
        api_database_connection=service.database_url("nova_api"), service_user=service.service_user(),
        availability_zone=layout.availability_zone(region), state_path=str(state), lock_path=str(state / "lock")))
    # One machine, no hypervisor: the sandbox's tuning on top of what the operator renders too.
    config_files.write(service.conf, overlay(shared, {
        "DEFAULT": {
            "host": compute_host(region),
            "compute_driver": "fake.FakeDriverWithoutFakeNodes",
            "instances_path": state / "instances",
            "default_schedule_zone": None,
            # No real VIFs: do not wait for Neutron's vif-plugged events.
            "vif_plugging_is_fatal": False,
            "vif_plugging_timeout": 0,
            "periodic_fuzzy_delay": 0,
            "my_ip": "127.0.0.1",
        },
        # One worker each: with several, nova forks after building its Placement
        # client, and the forked workers share (and garble) its HTTP connections.
        "scheduler": {"discover_hosts_in_cells_interval": 2, "workers": 1},
        "conductor": {"workers": 1},
        "vnc": {"enabled": False},
        # Sandbox bursts (10-20 concurrent boots) must not hit default quotas.
        "quota": {"instances": -1, "cores": -1, "ram": -1, "key_pairs": -1,
                  "server_groups": -1, "server_group_members": -1},
    }))


def _compute_config(layout: Layout, region: str) -> Path:
    """nova-compute must not see database connections: it reaches them via the conductor."""
    service = _service(layout, region)
    path = service.etc / "nova-compute.conf"
    text = service.conf.read_text()
    kept, skip = [], False
    for line in text.splitlines():
        if line.startswith("["):
            skip = line in ("[api_database]", "[database]")
        if not skip:
            kept.append(line)
    path.write_text("\n".join(kept) + "\n")
    return path


def _env(layout: Layout, region: str) -> dict[str, str]:
    # nova-api reads api-paste.ini and nova.conf from this directory.
    return {"OS_NOVA_CONFIG_DIR": str(_service(layout, region).etc)}


def prepare(layout: Layout, region: str, cache: SchemaCache | None = None) -> None:
    """API database, cell0 and cell1 mappings, cell schemas (cell0 and cell1 share one)."""
    cache = cache or SchemaCache(None)
    write_config(layout, region)
    service = _service(layout, region)
    shutil.copy(runtime.VENV_ETC / "nova" / "api-paste.ini", service.etc / "api-paste.ini")
    (service.state / "lock").mkdir(parents=True, exist_ok=True)
    (service.state / "instances").mkdir(parents=True, exist_ok=True)
    manage = [runtime.tool("nova-manage"), "--config-file", str(service.conf)]
    log = layout.logs / f"nova-{region}-setup.log"
    database.provide(layout, cache, f"nova_api-{region}", "nova_api", [service.database_name("nova_api")],
                     lambda: process.run([*manage, "api_db", "sync"], log, what=f"nova-{region} api_db sync"))
    map_cells(layout, region)
    # cell1 alone (--local_cell), then cell0: on a cold cache cell0 loads what cell1 stored.
    database.provide(layout, cache, f"nova_cell1-{region}", "nova_cell", [service.database_name()],
                     lambda: process.run([*manage, "db", "sync", "--local_cell"], log, what=f"nova-{region} db sync"))
    database.provide(layout, cache, f"nova_cell0-{region}", "nova_cell", [service.database_name("nova_cell0")],
                     lambda: process.run([*manage, "db", "sync"], log, what=f"nova-{region} db sync (cell0)"))


def map_cells(layout: Layout, region: str) -> None:
    """The rows ``nova-manage cell_v2 map_cell0`` and ``cell_v2 create_cell --name
    cell1`` write (nova/cmd/manage.py), without starting nova-manage twice: cell0
    with its fixed uuid and no transport, cell1 with nova.conf's transport URL and
    database. They name this sandbox's server and vhost, so they are never cached."""
    service = _service(layout, region)
    insert = ("INSERT INTO cell_mappings (created_at, uuid, name, transport_url, database_connection, disabled) "
              "VALUES (UTC_TIMESTAMP(), :uuid, :name, :transport_url, :database_connection, 0)")
    database.execute(layout, service.database_name("nova_api"), [
        (insert, {"uuid": CELL0_UUID, "name": "cell0", "transport_url": "none:///",
                  "database_connection": service.database_url("nova_cell0")}),
        (insert, {"uuid": str(uuid.uuid4()), "name": "cell1", "transport_url": service.transport_url(),
                  "database_connection": service.database_url()}),
    ])


def start_api(layout: Layout, region: str) -> process.ServiceRecord:
    return runtime.start_wsgi(layout, f"nova-api-{region}", "nova_api", layout.region_port(region, "nova"),
                              _env(layout, region), threads=16)


def start_control(layout: Layout, region: str) -> list[process.ServiceRecord]:
    """Conductor and scheduler; they need placement answering when they start."""
    conf = ["--config-file", str(_service(layout, region).conf)]
    return [
        runtime.start_daemon(layout, f"nova-{svc}-{region}", [runtime.tool(f"nova-{svc}"), *conf])
        for svc in ("conductor", "scheduler")
    ]


def wait_control_ready(layout: Layout, region: str, records: list[process.ServiceRecord], timeout: float = 300) -> None:
    """Conductor and scheduler consume their RPC topics. nova-compute pings the
    conductor as it starts, and a ping sent before the conductor's queue exists
    is lost: the compute waits out a 10 s timeout before it pings again."""
    for record in records:
        topic = record.name.split("-")[1]  # nova-conductor-RegionOne: conductor

        def consuming(topic: str = topic) -> bool:
            try:
                return rabbitmq.consumers(layout, region, topic) > 0
            except Exception:  # noqa: BLE001 - broker busy: ask again
                return False

        process.wait_until(consuming, f"waiting for nova-{topic} in {region} to consume its queue", timeout, record)


def start_compute(layout: Layout, region: str) -> process.ServiceRecord:
    conf = _compute_config(layout, region)
    return runtime.start_daemon(layout, f"nova-compute-{region}",
                                [runtime.tool("nova-compute"), "--config-file", str(conf)])


def wait_compute_ready(layout: Layout, region: str, conn, record: process.ServiceRecord, timeout: float = 600) -> None:
    """The compute service reports up and its host is mapped to cell1."""
    host = compute_host(region)

    def service_up() -> bool:
        return any(s.host == host and s.state == "up" for s in conn.compute.services(binary="nova-compute"))

    process.wait_until(lambda: _safe(service_up), f"waiting for nova-compute in {region} to report", timeout, record)

    def mapped() -> bool:
        return bool(database.scalar(layout, f"nova_api_{region.lower()}",
                                    "SELECT count(*) FROM host_mappings WHERE host = :host", {"host": host}))

    # The scheduler maps new hosts to cell1 every 2 s (discover_hosts_in_cells_interval);
    # nova-manage only if it has not within a while (one more process of seconds).
    try:
        process.wait_until(lambda: _safe(mapped), f"waiting for the scheduler to map {host}", HOST_MAPPING_WAIT,
                           record)
    except process.SandboxError:
        if not pid_alive(record.pid):
            raise
        manage = [runtime.tool("nova-manage"), "--config-file", str(_service(layout, region).conf)]
        process.run([*manage, "cell_v2", "discover_hosts"], layout.logs / f"nova-{region}-setup.log",
                    what=f"nova-{region} discover_hosts")

    def hypervisor_listed() -> bool:
        return any(True for _ in conn.compute.hypervisors())

    process.wait_until(lambda: _safe(hypervisor_listed), f"waiting for the {region} hypervisor", timeout, record)


def ensure_flavor(conn) -> None:
    # The same ids in every region: flavors are global objects (the gateway's model).
    for name, flavor_id, ram in ((FLAVOR, FLAVOR_ID, 64), (FLAVOR_ALT, FLAVOR_ALT_ID, 128)):
        if not conn.compute.find_flavor(name, ignore_missing=True):
            conn.compute.create_flavor(name=name, id=flavor_id, ram=ram, vcpus=1, disk=1, is_public=True)


def _safe(check) -> bool:
    try:
        return check()
    except Exception:  # noqa: BLE001 - the API may not be ready yet
        time.sleep(0.5)
        return False
