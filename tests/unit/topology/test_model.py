"""The topology model from recorded API answers (no I/O)."""

from __future__ import annotations

import json

import pytest

from isthmus.network import SHADOW_OWNER
from isthmus.topology import model
from tests.unit.topology import fixtures as fx


def test_regions_central_first_with_zones_and_health() -> None:
    topo = model.build(fx.snapshot())
    assert [(r.name, r.central, r.availability_zone, r.healthy) for r in topo.regions] == [
        ("CentralRegion", True, None, True), ("RegionOne", False, "az1", True), ("RegionTwo", False, "az2", True)]


def test_network_band_has_a_copy_per_region_with_its_segment() -> None:
    (band,) = model.build(fx.snapshot()).networks
    assert band.id == fx.NET and band.name == "tour-net" and not band.transit
    assert list(band.copies) == ["CentralRegion", "RegionOne", "RegionTwo"]
    assert {r: (c.present, c.network_type, c.segmentation_id) for r, c in band.copies.items()} == {
        r: (True, "vxlan", 1001) for r in ("CentralRegion", "RegionOne", "RegionTwo")}
    assert not band.drifted


def test_servers_where_bound_and_shadows_elsewhere() -> None:
    (band,) = model.build(fx.snapshot()).networks
    one, two = band.copies["RegionOne"], band.copies["RegionTwo"]
    assert [(p.id, p.role, p.server_name, p.ips) for p in one.servers] == [
        (fx.PORT1, "server", "tour-regionone", ["10.10.0.11"])]
    assert [(p.id, p.role) for p in one.shadows] == [(fx.PORT2, "shadow")]
    assert [(p.id, p.server_name) for p in two.servers] == [(fx.PORT2, "tour-regiontwo")]
    assert [p.id for p in two.shadows] == [fx.PORT1]
    assert band.copies["CentralRegion"].servers == []  # central holds the record, nothing is bound there


def test_attribute_drift_is_named_with_both_values() -> None:
    snap = fx.snapshot()
    snap.regions[1].networks = [fx.network(name="old-name", mtu=1500)]
    (band,) = model.build(snap).networks
    assert band.drifted
    assert [(d.attribute, d.central, d.region) for d in band.copies["RegionTwo"].drift] == [
        ("name", "tour-net", "old-name"), ("mtu", 1450, 1500)]
    assert band.copies["RegionOne"].drift == []


def test_empty_and_missing_description_is_no_drift() -> None:
    assert model.drift({"description": ""}, {"description": None}, ["description"]) == []
    assert model.drift({"mtu": 1450}, {}, ["mtu"]) == []  # not shown by the region: unknown, not drift


def test_missing_shadow_is_drift() -> None:
    snap = fx.snapshot()
    snap.regions[1].ports = [p for p in snap.regions[1].ports or [] if p["device_owner"] != SHADOW_OWNER]
    (band,) = model.build(snap).networks
    assert band.copies["RegionTwo"].missing_shadows == [fx.PORT1]
    assert band.copies["RegionOne"].missing_shadows == []
    assert band.drifted


def test_a_copy_of_a_port_central_lacks_is_shown_as_an_orphan() -> None:
    """Issue 25 hole 3: a copy central has no port for (and no tombstone) is kept,
    never silently: the topology names it."""
    snap = fx.snapshot()
    snap.central.ports = [p for p in snap.central.ports or [] if p["id"] != fx.PORT2]
    (band,) = model.build(snap).networks
    assert band.copies["RegionTwo"].orphans == [fx.PORT2]  # the server's copy
    assert band.copies["RegionOne"].orphans == [fx.PORT2]  # and its shadow
    assert band.drifted


def test_no_shadow_expected_without_local_members_or_on_vlan() -> None:
    central = fx.network()
    ports = [fx.port(fx.PORT1, "RegionOne", fx.VM1, "10.10.0.11", "fa:16:3e:00:00:11")]
    assert model.missing_shadows(central, ports, "RegionTwo", [fx.dhcp("RegionTwo")]) == []
    member = fx.port(fx.PORT2, "RegionTwo", fx.VM2, "10.10.0.12", "fa:16:3e:00:00:12")
    assert model.missing_shadows(central, ports, "RegionTwo", [member]) == [fx.PORT1]
    vlan = fx.network(**{"provider:network_type": "vlan"})
    assert model.missing_shadows(vlan, ports, "RegionTwo", [member]) == []
    unbound = {**member, "binding:host_id": ""}  # a server's port before Nova binds it (or after)
    assert model.missing_shadows(central, ports, "RegionTwo", [unbound]) == []


def test_region_without_a_copy() -> None:
    snap = fx.snapshot()
    snap.regions[1].networks = []
    (band,) = model.build(snap).networks
    two = band.copies["RegionTwo"]
    assert not two.present and not two.unknown
    assert [p.id for p in two.servers] == [fx.PORT2]  # central still records the binding there


def test_unreachable_region_is_unhealthy_and_the_rest_still_builds() -> None:
    topo = model.build(fx.region_two_down(fx.snapshot()))
    two = fx.region(topo, "RegionTwo")
    assert two is not None and not two.healthy and "ConnectFailure" in two.errors["network"]
    assert fx.region(topo, "RegionOne").healthy
    (band,) = topo.networks
    assert band.copies["RegionTwo"].unknown and not band.copies["RegionTwo"].present
    assert [p.id for p in band.copies["RegionTwo"].servers] == [fx.PORT2]
    assert [p.id for p in band.copies["RegionOne"].shadows] == [fx.PORT2]
    assert set(topo.routers[0].halves) == {"RegionOne"}


def test_router_halves_per_region() -> None:
    (router,) = model.build(fx.snapshot()).routers
    assert router.name == "r1"
    assert {r: (h.id, h.gateway) for r, h in router.halves.items()} == {
        "RegionOne": ("half-RegionOne", False), "RegionTwo": ("half-RegionTwo", True)}
    assert all(h.drift == [] for h in router.halves.values())


def test_router_half_drift() -> None:
    snap = fx.snapshot()
    snap.regions[0].routers = [fx.half("RegionOne", name="renamed")]
    (router,) = model.build(snap).routers
    assert [(d.attribute, d.central, d.region) for d in router.halves["RegionOne"].drift] == [
        ("name", "r1", "renamed")]


def test_jobs_backlog_and_failures() -> None:
    jobs = model.build(fx.snapshot()).jobs
    assert jobs.counts == {"NEW": 1, "RUNNING": 0, "FAIL": 1} and jobs.backlog == 1
    (failed,) = jobs.failed
    assert (failed.type, failed.failures) == ("router_sync", 5)
    assert "availability_zone_hints" in (failed.last_error or "")


def test_admin_api_unreachable_marks_central_but_403_does_not() -> None:
    snap = fx.snapshot()
    snap.jobs, snap.admin_error, snap.admin_reachable = None, "multiregion: HTTP 403: forbidden", True
    topo = model.build(snap)
    assert fx.region(topo, "CentralRegion").healthy and (topo.jobs.error or "").endswith("forbidden")
    snap.admin_error, snap.admin_reachable = "multiregion: ConnectFailure", False
    assert not fx.region(model.build(snap), "CentralRegion").healthy


def test_transit_network_flagged() -> None:
    snap = fx.snapshot()
    snap.central.networks = [fx.network(description=f"isthmus:transit-of:{fx.ROUTER}")]
    assert model.build(snap).networks[0].transit


def test_only_network_by_name_or_id() -> None:
    topo = model.build(fx.snapshot())
    assert model.only_network(topo, "tour-net").networks[0].id == fx.NET
    assert model.only_network(topo, fx.NET).routers == []
    with pytest.raises(LookupError, match="no central network"):
        model.only_network(topo, "nope")


def test_to_dict_is_json_and_raw_optional() -> None:
    topo = model.build(fx.snapshot())
    full = json.loads(json.dumps(topo.to_dict()))
    assert full["networks"][0]["copies"]["RegionOne"]["raw"]["id"] == fx.NET
    lean = topo.to_dict(raw=False)
    assert "raw" not in json.dumps(lean).replace('"raw_', "")
    assert lean["networks"][0]["copies"]["RegionTwo"]["segmentation_id"] == 1001


def test_an_ovn_region_shows_its_backend_and_remote_ports_not_shadows() -> None:
    snap = fx.snapshot()
    one, two = snap.regions
    one.backend, two.backend = "ovn", "ovs"
    one.ports = [p for p in one.ports or [] if p["device_owner"] != SHADOW_OWNER]  # OVN holds none
    topo = model.build(snap)
    assert [(r.name, r.backend) for r in topo.regions] == [("CentralRegion", None), ("RegionOne", "ovn"),
                                                             ("RegionTwo", "ovs")]
    (band,) = topo.networks
    copy = band.copies["RegionOne"]
    assert [(p.id, p.role, p.region, p.server_name) for p in copy.remote_ports] == [
        (fx.PORT2, "remote", "RegionTwo", "tour-regiontwo")]
    assert copy.missing_shadows == [] and copy.shadows == [] and not band.drifted
    assert band.copies["RegionTwo"].remote_ports == []


def test_the_table_names_backends_and_remote_ports() -> None:
    from isthmus.topology.formats import to_table

    snap = fx.snapshot()
    snap.regions[0].backend = "ovn"
    snap.regions[0].ports = [p for p in snap.regions[0].ports or [] if p["device_owner"] != SHADOW_OWNER]
    text = to_table(model.build(snap))
    assert "| Backend" in text and "| ovn " in text
    assert "remote: tour-regiontwo" in text
