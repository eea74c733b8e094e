"""The sandbox brings up a real multi-region OpenStack."""

from __future__ import annotations

import json
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.sandboxes import BIN, isthmus

pytestmark = pytest.mark.integration


def openstack(sandbox, *args: str) -> str:
    result = subprocess.run([str(BIN / "openstack"), *args], env=sandbox.env(), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, f"openstack {' '.join(args)}: {result.stderr}"
    return result.stdout


@pytest.fixture
def region_network(sandbox):
    """A demo network with a subnet in each region, removed afterwards."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    made = {}
    for index, region in enumerate(sandbox.regions):
        conn = sandbox.connect(region)
        net = conn.network.create_network(name=name)
        conn.network.create_subnet(network_id=net.id, ip_version=4, cidr=f"10.{100 + index}.0.0/24")
        made[region] = (conn, net)
    yield {region: net for region, (_, net) in made.items()}
    for conn, net in made.values():
        for server in conn.compute.servers(name=name):
            conn.compute.delete_server(server)
            conn.compute.wait_for_delete(server, wait=120)
        for port in conn.network.ports(network_id=net.id):
            conn.network.delete_port(port)
        conn.network.delete_network(net)


def boot(conn, name: str, network_id: str):
    image = conn.image.find_image("tiny", ignore_missing=False)
    flavor = conn.compute.find_flavor("m1.tiny", ignore_missing=False)
    return conn.compute.create_server(name=name, image_id=image.id, flavor_id=flavor.id,
                                      networks=[{"uuid": network_id}])


def test_regions_listed_by_the_openstack_cli(sandbox):
    listed = openstack(sandbox, "--os-cloud", "isthmus-admin", "region", "list", "-f", "json")
    regions = {r["Region"] for r in json.loads(listed)}
    assert {"CentralRegion", "RegionOne", "RegionTwo"} <= regions


def test_catalog_has_per_region_endpoints(sandbox):
    conn = sandbox.connect("RegionOne", cloud="isthmus-admin")
    ident = conn.identity
    services = {s.id: s.type for s in ident.services()}
    where = {(services[e.service_id], e.region_id) for e in ident.endpoints(interface="public")}
    assert ("network", "CentralRegion") in where
    assert ("identity", "CentralRegion") in where
    for region in sandbox.regions:
        for service_type in ("network", "compute", "image", "placement", "identity"):
            assert (service_type, region) in where, f"no {service_type} endpoint in {region}"
    # CentralRegion's only compute endpoint is isthmus-gateway.
    central = [e.url for e in ident.endpoints(interface="public")
               if services[e.service_id] == "compute" and e.region_id == "CentralRegion"]
    assert len(central) == 1 and central[0].endswith("/compute/v2.1")


def test_each_region_has_tiny_image_flavor_and_zone(sandbox):
    for index, region in enumerate(sandbox.regions):
        conn = sandbox.connect(region)
        assert conn.image.find_image("tiny").visibility == "public"
        assert conn.compute.find_flavor("m1.tiny") is not None
        zones = {z.name for z in conn.compute.availability_zones()}
        assert zones == {f"az{index + 1}"}


def test_server_boots_active_with_bound_port_in_each_region(sandbox, region_network):
    for index, region in enumerate(sandbox.regions):
        conn = sandbox.connect(region)
        net = region_network[region]
        server = conn.compute.wait_for_server(boot(conn, net.name, net.id), wait=180)
        assert server.status == "ACTIVE"
        assert server.availability_zone == f"az{index + 1}"
        # Binding attributes are admin-only.
        admin = sandbox.connect(region, cloud="isthmus-admin")
        (port,) = list(admin.network.ports(device_id=server.id))
        assert port.network_id == net.id
        assert port.status == "ACTIVE"
        assert port.binding_host_id == f"{region.lower()}-compute"
        assert port.binding_vif_type == "ovs"


def test_ten_concurrent_boots_all_go_active(sandbox, region_network):
    conn = sandbox.connect("RegionOne")
    net = region_network["RegionOne"]
    with ThreadPoolExecutor(max_workers=10) as pool:
        servers = list(pool.map(lambda _: boot(sandbox.connect("RegionOne"), net.name, net.id), range(10)))
    finished = [conn.compute.wait_for_server(s, wait=300, status="ACTIVE") for s in servers]
    assert [s.status for s in finished] == ["ACTIVE"] * 10
    ips = {a["addr"] for s in finished for addrs in s.addresses.values() for a in addrs}
    assert len(ips) == 10


def test_openstack_cli_creates_and_lists_in_a_region(sandbox):
    name = f"cli-{uuid.uuid4().hex[:8]}"
    out = json.loads(openstack(sandbox, "--os-cloud", "isthmus-demo", "--os-region-name", "RegionTwo",
                               "network", "create", name, "-f", "json"))
    try:
        listed = openstack(sandbox, "--os-cloud", "isthmus-demo", "--os-region-name", "RegionTwo",
                           "network", "list", "-f", "value", "-c", "Name")
        assert name in listed.split()
        other = openstack(sandbox, "--os-cloud", "isthmus-demo", "--os-region-name", "RegionOne",
                          "network", "list", "-f", "value", "-c", "Name")
        assert name not in other.split()  # each region has its own Neutron (for now)
    finally:
        openstack(sandbox, "--os-cloud", "isthmus-demo", "--os-region-name", "RegionTwo", "network", "delete",
                  out["id"])


def test_status_reports_every_service_healthy(sandbox):
    result = isthmus("sandbox", "status", "--state-dir", str(sandbox.state_dir))
    lines = result.stdout.splitlines()[1:]
    names = {line.split()[0] for line in lines}
    for region in sandbox.regions:
        assert {f"nova-compute-{region}", f"nova-api-{region}", f"neutron-{region}", f"glance-{region}"} <= names
    assert {"keystone", "neutron-CentralRegion", "mariadb"} <= names
    assert all(line.split()[1] == "healthy" for line in lines)


def test_logs_shows_a_service_log(sandbox):
    result = isthmus("sandbox", "logs", "--state-dir", str(sandbox.state_dir), "keystone", "-n", "5")
    assert 0 < len(result.stdout.splitlines()) <= 5
    missing = isthmus("sandbox", "logs", "--state-dir", str(sandbox.state_dir), "no-such-service", check=False)
    assert missing.returncode == 1
    assert "no log for 'no-such-service'" in missing.stderr


def test_up_on_a_running_sandbox_reports_status(sandbox):
    from isthmus.sandbox.process import ServiceRecord

    before = {r.name: r.pid for r in ServiceRecord.load_all(sandbox.state_dir / "run")}
    result = isthmus("sandbox", "up", "--state-dir", str(sandbox.state_dir), "--base-port", str(sandbox.base_port))
    assert "already running" in result.stdout
    after = {r.name: r.pid for r in ServiceRecord.load_all(sandbox.state_dir / "run")}
    assert after == before


def test_isthmus_db_is_versioned_and_at_head(sandbox):
    """The sandbox ran `isthmus db upgrade`: a service's own config file finds the
    database at the code's head, with no drift (what an operator checks)."""
    conf = sandbox.state_dir / "etc" / "isthmus" / "admin-api.conf"
    result = isthmus("db", "check", "--config-file", str(conf))
    assert "(head)" in result.stdout
    current = isthmus("db", "current", "--config-file", str(conf)).stdout
    assert "status: current" in current
