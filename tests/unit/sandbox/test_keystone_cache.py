"""A Keystone database from the schema cache gets this sandbox's endpoints, or is refused."""

import sqlite3

import pytest

from isthmus.sandbox import keystone
from isthmus.sandbox.layout import Layout
from isthmus.sandbox.process import SandboxError


def _keystone_db(layout: Layout, with_catalog: bool) -> None:
    """The tables point_endpoints reads, filled as bootstrap (and register) fill them."""
    layout.data.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(layout.sqlite_path("keystone"))
    conn.executescript("""
        CREATE TABLE service (id TEXT PRIMARY KEY, type TEXT, enabled BOOLEAN, extra TEXT);
        CREATE TABLE region (id TEXT PRIMARY KEY);
        CREATE TABLE endpoint (id TEXT PRIMARY KEY, interface TEXT, service_id TEXT, url TEXT, region_id TEXT);
    """)
    endpoints = keystone.expected_endpoints(layout, with_catalog)
    types = sorted({kind for kind, _, _ in endpoints})
    conn.executemany("INSERT INTO service VALUES (?, ?, 1, '{}')", [(f"svc-{t}", t) for t in types])
    regions = {region for _, region, _ in endpoints} | ({"CentralRegion"})
    conn.executemany("INSERT INTO region VALUES (?)", [(r,) for r in sorted(regions)])
    conn.executemany("INSERT INTO endpoint VALUES (?, ?, ?, ?, ?)",
                     [(f"ep-{i}", interface, f"svc-{kind}", url, region)
                      for i, ((kind, region, interface), url) in enumerate(sorted(endpoints.items()))])
    conn.commit()
    conn.close()


def _urls(layout: Layout) -> dict:
    conn = sqlite3.connect(layout.sqlite_path("keystone"))
    rows = conn.execute("SELECT s.type, e.region_id, e.interface, e.url FROM endpoint e "
                        "JOIN service s ON s.id = e.service_id").fetchall()
    conn.close()
    return {(kind, region, interface): url for kind, region, interface, url in rows}


@pytest.mark.parametrize("with_catalog", [False, True])
def test_endpoints_made_elsewhere_get_this_sandboxs_ports(tmp_path, with_catalog):
    made = Layout(tmp_path / "made", base_port=30000, octavia=True)
    _keystone_db(made, with_catalog)
    here = Layout(tmp_path / "made", base_port=45000, octavia=True)  # same files, other ports
    keystone.point_endpoints(here, with_catalog)
    urls = _urls(here)
    assert urls == keystone.expected_endpoints(here, with_catalog)
    assert urls[("identity", "CentralRegion", "admin")] == "http://127.0.0.1:45000/v3"
    if with_catalog:
        assert urls[("load-balancer", "RegionTwo", "internal")] == "http://127.0.0.1:45025"


@pytest.mark.parametrize("other", [
    {"regions": ("RegionOne", "RegionTwo", "RegionThree")},
    {"octavia": False},
    {"compute": False},
])
def test_a_catalogue_of_another_shape_is_refused(tmp_path, other):
    _keystone_db(Layout(tmp_path, base_port=30000, octavia=True), with_catalog=True)
    with pytest.raises(SandboxError, match="another catalogue"):
        keystone.point_endpoints(Layout(tmp_path, base_port=45000, **other), with_catalog=True)


def test_a_bootstrap_only_database_is_not_taken_for_a_catalogue(tmp_path):
    _keystone_db(Layout(tmp_path, base_port=30000), with_catalog=False)
    with pytest.raises(SandboxError):
        keystone.point_endpoints(Layout(tmp_path, base_port=45000), with_catalog=True)


def test_catalogue_entry_ignores_ports_and_state_dir_but_not_the_shape(tmp_path):
    entry = keystone.catalog_entry(Layout(tmp_path / "a", base_port=30000, octavia=True))
    assert entry == keystone.catalog_entry(Layout(tmp_path / "b", base_port=45000, octavia=True))
    assert entry.startswith("keystone-catalog-") and entry.endswith(".sqlite")
    assert entry != keystone.catalog_entry(Layout(tmp_path / "a", base_port=30000))
    assert entry != keystone.catalog_entry(Layout(tmp_path / "a", base_port=30000, octavia=True,
                                                  regions=("RegionOne", "RegionTwo", "RegionThree")))
