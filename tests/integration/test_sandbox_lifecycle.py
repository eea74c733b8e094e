"""Second sandboxes beside the main one: side by side, errors, and a clean down."""

from __future__ import annotations

import socket

import pytest

from tests.integration.helpers import sandbox_layout
from tests.sandboxes import Sandbox, free_base_port, isthmus

pytestmark = pytest.mark.integration


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def pids_alive(state_dir) -> list[int]:
    from isthmus.sandbox.process import ServiceRecord, pid_alive

    return [r.pid for r in ServiceRecord.load_all(state_dir / "run") if pid_alive(r.pid)]


def namespaces() -> set[str]:
    import json
    import subprocess

    out = subprocess.run(["ip", "-j", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {e["name"] for e in json.loads(out or "[]")}


def schemas_kept(*entries: str) -> bool:
    """Whether the schema cache (as ``sandbox up`` here would open it) holds these entries intact."""
    from isthmus.sandbox.schema_cache import EntryError, SchemaCache

    cache = SchemaCache.open()
    try:
        return cache.enabled and all(cache.read(entry) for entry in entries)
    except EntryError:
        return False


def test_second_sandbox_runs_beside_the_first_and_down_leaves_nothing(sandbox, tmp_path):
    from isthmus.sandbox.dataplane import names
    from isthmus.sandbox.process import ServiceRecord

    first = sandbox_layout(sandbox.state_dir)
    base = free_base_port(sandbox.base_port + 500, 2)
    # Beside a --dataplane sandbox the second has its own dataplane too: its
    # namespaces must not collide with the first's, and down removes only its own.
    dataplane = ["--dataplane"] if first.dataplane else []
    # The first sandbox's lasting namespaces (hosts, underlay): servers' and routers'
    # come and go with the tests other workers run meanwhile.
    transient = ("-vm-", *(names.namespace_prefix(first, r, names.Namespaces.ROUTERS).removeprefix(names.prefix(first))
                           for r in first.regions))
    first_namespaces = {ns for ns in namespaces()
                        if ns.startswith(names.prefix(first)) and not any(t in ns for t in transient)}
    # The test sandbox, started before this one, kept its schemas: this start loads them.
    kept = schemas_kept("keystone.sqlite", "neutron.sqlite", "isthmus.sqlite")
    # One region: the smallest sandbox that still has central and a region (the cheapest to start).
    up = isthmus("sandbox", "up", "--state-dir", str(tmp_path), "--base-port", str(base), "--no-compute",
                 "--regions", "RegionOne", *dataplane)
    second = sandbox_layout(tmp_path)
    try:
        summary = next(line for line in up.stdout.splitlines() if "schemas: " in line)
        if kept:
            for schema in ("keystone", "isthmus", "neutron-CentralRegion", "neutron-RegionOne"):
                assert f"{schema} migrated" not in summary, summary
        records = ServiceRecord.load_all(tmp_path / "run")
        agents = {f"dataplane-{r}" for r in second.regions} if dataplane else set()
        assert {r.name for r in records} == {"keystone", "neutron-CentralRegion", "neutron-RegionOne",
                                             "isthmus-admin", "isthmus-xjob", *agents}
        conn = sandbox.connect("RegionOne")  # the first sandbox still answers
        assert conn.compute.find_flavor("m1.tiny") is not None
        assert all(listening(r.port) for r in records if r.port is not None)  # isthmus-xjob has none
        if dataplane:
            ours = {ns for ns in namespaces() if ns.startswith(names.prefix(second) + "-")}
            assert names.host_namespace(second, "RegionOne") in ours and not ours & first_namespaces
    finally:
        isthmus("sandbox", "down", "--state-dir", str(tmp_path))
    assert pids_alive(tmp_path) == []
    assert not any(listening(p) for p in range(base, base + 20))
    if dataplane:
        assert not [ns for ns in namespaces() if ns.startswith(names.prefix(second))]
        assert first_namespaces and first_namespaces <= namespaces()  # the first sandbox's are untouched


@pytest.mark.exclusive  # a second sandbox with compute: alone, not beside the parallel tests
def test_a_tls_sandbox_serves_the_gateway_and_the_admin_api_over_verified_https(sandbox, tmp_path):
    """Issue 26 item 14: ``sandbox up --tls``; the openstack CLI lists servers through
    the gateway and pods through the Admin API over https (clouds.yaml's cacert); a
    plain-http request to those ports fails; an untrusted client is refused.

    The same sandbox keeps its Neutrons on MariaDB (``--neutron-db mariadb``, one
    start for both options): a regional port on a central network gets central's
    UUID, MAC and address there too."""
    import os
    import ssl
    import subprocess
    import urllib.error
    import urllib.request

    from tests.sandboxes import BIN

    base = free_base_port(sandbox.base_port + 700, 2)
    try:
        # Inside the try: an up that fails or times out still stops what it started.
        isthmus("sandbox", "up", "--state-dir", str(tmp_path), "--base-port", str(base), "--regions", "RegionOne",
                "--tls", "--neutron-db", "mariadb")
        layout = sandbox_layout(tmp_path)
        env = {**os.environ, "OS_CLIENT_CONFIG_FILE": str(layout.clouds_yaml)}
        for args in (["--os-cloud", "isthmus-demo", "--os-region-name", "CentralRegion", "server", "list"],
                     ["--os-cloud", "isthmus-admin", "multiregion", "pod", "list"]):
            out = subprocess.run([str(BIN / "openstack"), *args], env=env, capture_output=True, text=True,
                                 timeout=120)
            assert out.returncode == 0, out.stderr
        for port in (layout.gateway_port, layout.admin_api_port):
            with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read()
            with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
                urllib.request.urlopen(f"https://127.0.0.1:{port}/", timeout=10, context=ssl.create_default_context())
            trusted = ssl.create_default_context(cafile=layout.ca_file)
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/", timeout=10, context=trusted) as reply:
                assert reply.status < 400

        for region in ("CentralRegion", "RegionOne"):
            assert "connection = mysql+pymysql://" in (layout.etc / f"neutron-{region}" / "neutron.conf").read_text()
        second = Sandbox(tmp_path, base, ("RegionOne",))
        central = second.connect("CentralRegion")
        net = central.network.create_network(name="on-mariadb")
        central.network.create_subnet(network_id=net.id, cidr="10.88.0.0/24", ip_version=4)
        port = second.connect("RegionOne").network.create_port(network_id=net.id, name="on-mariadb")
        at_central = central.network.get_port(port.id)
        assert (at_central.mac_address, at_central.fixed_ips) == (port.mac_address, port.fixed_ips)
    finally:
        isthmus("sandbox", "down", "--state-dir", str(tmp_path), check=False)


def test_busy_port_is_named_and_nothing_is_started(tmp_path):
    base = free_base_port(40000, 2)
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", base + 1))  # central Neutron's port
    blocker.listen()
    try:
        result = isthmus("sandbox", "up", "--state-dir", str(tmp_path), "--base-port", str(base), "--no-compute",
                         check=False)
    finally:
        blocker.close()
    assert result.returncode == 1
    assert f"port {base + 1} (for neutron-CentralRegion) is already in use" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert pids_alive(tmp_path) == []


def test_state_dir_that_is_not_a_sandbox_is_refused(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    result = isthmus("sandbox", "up", "--state-dir", str(tmp_path), "--base-port", str(free_base_port(41000, 2)),
                     "--no-compute", check=False)
    assert result.returncode == 1
    assert "is not empty and holds no sandbox" in result.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_bad_regions_option_is_rejected(tmp_path):
    result = isthmus("sandbox", "up", "--state-dir", str(tmp_path), "--regions", "RegionOne,RegionOne", check=False)
    assert result.returncode == 1
    assert "--regions: region names repeat" in result.stderr
