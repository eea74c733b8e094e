import configparser

import pytest

from isthmus.sandbox.layout import Layout, parse_regions
from isthmus.sandbox.plan import planned_ports


def test_ports_are_distinct_and_derive_from_base(tmp_path):
    layout = Layout(tmp_path, base_port=30000, regions=("RegionOne", "RegionTwo", "RegionThree"))
    ports = [p for _, p in planned_ports(layout)]
    assert len(ports) == len(set(ports))
    assert min(ports) == 30000 and max(ports) < 30000 + 10 * 4
    assert layout.region_port("RegionTwo", "nova") == 30021


def test_two_base_ports_never_share_a_port(tmp_path):
    a = {p for _, p in planned_ports(Layout(tmp_path / "a", base_port=30000))}
    b = {p for _, p in planned_ports(Layout(tmp_path / "b", base_port=30030))}
    assert not a & b


def test_no_compute_plans_only_keystone_neutron_and_admin_api(tmp_path):
    layout = Layout(tmp_path, base_port=30000, compute=False)
    ports = planned_ports(layout)
    assert [n for n, _ in ports] == [
        "keystone", "neutron-CentralRegion", "isthmus-admin", "isthmus-xjob", "neutron-RegionOne", "neutron-RegionTwo"]
    assert dict(ports)["isthmus-admin"] == layout.admin_api_port == 30002


def test_no_volume_plans_no_cinder_and_catalogues_no_volume_api(tmp_path):
    from isthmus.sandbox.keystone import catalog
    from isthmus.sandbox.plan import steps

    full, light = Layout(tmp_path / "a", base_port=30000), Layout(tmp_path / "b", base_port=30000, volume=False)
    assert {n for n, _ in planned_ports(full)} - {n for n, _ in planned_ports(light)} == {
        "cinder-RegionOne", "cinder-RegionTwo"}
    assert not any(step.name.startswith("cinder") for step in steps(light))
    assert {f"cinder-api-{r}" for r in full.regions} <= {step.name for step in steps(full)}
    types = {(e.type, e.region) for e in catalog(light)}
    assert not {t for t, _ in types} & {"block-storage", "volumev3"}
    assert ("compute", "CentralRegion") in types  # the gateway still serves compute
    light.make_dirs()
    light.save()
    assert Layout.load(light.state_dir) == light


def test_job_workers_each_get_a_metrics_port_and_a_start_step(tmp_path):
    from isthmus.sandbox.plan import steps

    layout = Layout(tmp_path, base_port=30000, compute=False, xjob_workers=3)
    ports = dict(planned_ports(layout))
    assert [ports[n] for n in ("isthmus-xjob", "isthmus-xjob-2", "isthmus-xjob-3")] == [30005, 30006, 30007]
    assert {"isthmus-xjob", "isthmus-xjob-2", "isthmus-xjob-3"} <= {step.name for step in steps(layout)}
    assert set(layout.metrics_urls()) >= {"isthmus-xjob", "isthmus-xjob-2", "isthmus-xjob-3"}
    layout.make_dirs()
    layout.save()
    assert Layout.load(tmp_path) == layout
    for bad in (0, 5):
        with pytest.raises(ValueError, match="--xjob-workers"):
            Layout(tmp_path, xjob_workers=bad)


def test_availability_zones_follow_region_order(tmp_path):
    layout = Layout(tmp_path, regions=("RegionOne", "RegionTwo", "RegionThree"))
    assert [layout.availability_zone(r) for r in layout.regions] == ["az1", "az2", "az3"]


def test_layout_round_trips_through_state_file(tmp_path):
    layout = Layout(tmp_path, base_port=25000, regions=("A", "B"), compute=False)
    layout.make_dirs()
    layout.save()
    assert Layout.load(tmp_path) == layout


def test_rabbit_vhosts_are_per_region_and_per_sandbox(tmp_path):
    one, two = Layout(tmp_path / "one"), Layout(tmp_path / "two")
    assert one.rabbit_vhost("RegionOne") != one.rabbit_vhost("RegionTwo")
    assert one.rabbit_vhost("RegionOne") != two.rabbit_vhost("RegionOne")
    assert Layout(tmp_path / "one").rabbit_vhost("RegionOne") == one.rabbit_vhost("RegionOne")


@pytest.mark.parametrize("text, message", [
    ("", "at least one region"),
    ("RegionOne,RegionOne", "region names repeat"),
    ("CentralRegion", "is the central region"),
    ("Region One", "not a valid region name"),
    (",".join(f"R{i}" for i in range(10)), "at most 9 regions"),
])
def test_bad_region_lists_are_rejected(text, message):
    with pytest.raises(ValueError, match=message):
        parse_regions(text)


def test_region_list_keeps_order_and_trims():
    assert parse_regions(" RegionTwo, RegionOne ,") == ("RegionTwo", "RegionOne")


def test_base_port_must_leave_room(tmp_path):
    with pytest.raises(ValueError, match="--base-port"):
        Layout(tmp_path, base_port=65530)


def test_stock_neutron_has_its_own_port_and_stock_ml2(tmp_path):
    from isthmus.sandbox import neutron
    from isthmus.sandbox.layout import STOCK_NEUTRON

    layout = Layout(tmp_path, base_port=30000, compute=False, stock_neutron=True)
    ports = dict(planned_ports(layout))
    assert ports[f"neutron-{STOCK_NEUTRON}"] == layout.neutron_port(STOCK_NEUTRON) == 30004
    assert len(set(ports.values())) == len(ports)
    assert "neutron-Stock" not in dict(planned_ports(Layout(tmp_path, compute=False)))
    layout.make_dirs()
    neutron.write_config(layout, STOCK_NEUTRON)
    conf = configparser.ConfigParser(interpolation=None)
    conf.read(layout.etc / f"neutron-{STOCK_NEUTRON}" / "neutron.conf")
    ml2 = configparser.ConfigParser(interpolation=None)
    ml2.read(layout.etc / f"neutron-{STOCK_NEUTRON}" / "ml2_conf.ini")
    # The plugin options, not the whole text: paths hold the checkout's folder, often named isthmus.
    assert conf["DEFAULT"]["core_plugin"] == "ml2"
    assert "isthmus" not in conf["DEFAULT"]["service_plugins"]
    # Only the sandbox's binder (hosts without agents), none of Isthmus' own drivers.
    assert ml2["ml2"]["mechanism_drivers"] == "isthmus_sandbox_binder"


def test_octavia_is_off_by_default_and_catalogued_per_region_when_on(tmp_path):
    from isthmus.sandbox import keystone

    plain = Layout(tmp_path / "plain")
    assert not any(name.startswith("octavia") for name in dict(planned_ports(plain)))
    assert not [e for e in keystone.catalog(plain) if e.type == "load-balancer"]
    layout = Layout(tmp_path / "lb", base_port=30000, octavia=True)
    ports = dict(planned_ports(layout))
    assert ports["octavia-api-RegionOne"] == 30015 and ports["octavia-api-RegionTwo"] == 30025
    assert len(set(ports.values())) == len(ports)
    lbs = {e.region: e.url for e in keystone.catalog(layout) if e.type == "load-balancer"}
    assert lbs == {"RegionOne": "http://127.0.0.1:30015", "RegionTwo": "http://127.0.0.1:30025"}


def test_octavia_needs_compute(tmp_path):
    with pytest.raises(ValueError, match="--octavia"):
        Layout(tmp_path, compute=False, octavia=True)


def test_ovn_regions_need_the_dataplane_and_known_regions_and_round_trip(tmp_path):
    with pytest.raises(ValueError, match="--ovn: needs --dataplane"):
        Layout(tmp_path, ovn_regions=("RegionOne",))
    with pytest.raises(ValueError, match="RegionNine not in --regions"):
        Layout(tmp_path, dataplane=True, ovn_regions=("RegionNine",))
    layout = Layout(tmp_path, dataplane=True, ovn_regions=("RegionTwo",))
    assert layout.is_ovn("RegionTwo") and not layout.is_ovn("RegionOne")
    layout.make_dirs()
    layout.save()
    assert Layout.load(tmp_path) == layout
    # Each OVN region's Northbound and Southbound get ports of their own, apart from every other.
    ports = [layout.region_port(r, s) for r in layout.regions for s in ("neutron", "octavia", "ovn_nb", "ovn_sb")]
    assert len(set(ports)) == len(ports)


def test_neutron_on_mariadb_moves_every_neutron_but_the_stock_one_and_needs_the_server(tmp_path):
    from isthmus.sandbox import database, neutron
    from isthmus.sandbox.layout import CENTRAL_REGION, STOCK_NEUTRON
    from isthmus.sandbox.plan import steps

    plain = Layout(tmp_path / "a", base_port=30000, compute=False)
    assert not plain.uses_mariadb and "mariadb" not in dict(planned_ports(plain))
    assert not any(step.name == "mariadb" for step in steps(plain))

    layout = Layout(tmp_path / "b", base_port=30000, compute=False, stock_neutron=True, neutron_mariadb=True)
    assert dict(planned_ports(layout))["mariadb"] == layout.mariadb_port
    assert database.database_names(layout) == ["neutron_centralregion", "neutron_regionone", "neutron_regiontwo"]
    plan = {step.name: step for step in steps(layout)}
    assert "rabbitmq" not in plan  # no compute: Neutron casts to a fake transport
    for region in (CENTRAL_REGION, *layout.regions):
        assert "mariadb" in plan[f"neutron-setup-{region}"].after
        assert neutron._database_url(layout, region) == \
            f"mysql+pymysql://root@127.0.0.1:{layout.mariadb_port}/neutron_{region.lower()}"
    assert "mariadb" not in plan[f"neutron-setup-{STOCK_NEUTRON}"].after
    assert neutron._database_url(layout, STOCK_NEUTRON).startswith("sqlite:")
    layout.make_dirs()
    layout.save()
    assert Layout.load(layout.state_dir) == layout
