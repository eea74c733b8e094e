"""Region search order and InstancesV2 semantics."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from isthmus.ccm.config import NetworkingOptions
from isthmus.ccm.errors import CCMError, InstanceNotFound, MultipleResultsError, RegionError, UnknownRegionError
from isthmus.ccm.openstack.instances import (
    Instances,
    NodeRef,
    is_valid_label_value,
    plan_search,
    sanitize_label,
)
from isthmus.ccm.openstack.model import Flavor, Network, NodeAddress, Port, Server, ServerAddress
from isthmus.ccm.openstack.providerid import ProviderIDError

from .fakes import FakeClients, FakeRegion

R = ("A", "B", "C")


@pytest.mark.parametrize(
    ("pid", "label", "regions", "by_id"),
    [
        ("openstack://B/i", "", ("B",), True),
        ("openstack://B/i", "C", ("B",), True),
        ("openstack:///i", "B", ("B", "A", "C"), True),
        ("/i", "B", ("B", "A", "C"), True),
        ("openstack:///i", "Z", ("A", "B", "C"), True),
        ("openstack:///i", "", ("A", "B", "C"), True),
        ("", "C", ("C", "A", "B"), False),
        ("", "", ("A", "B", "C"), False),
    ],
)
def test_plan(pid: str, label: str, regions: tuple[str, ...], by_id: bool) -> None:
    plan = plan_search(NodeRef("node-1", pid, label), R)
    assert plan.regions == regions
    assert plan.by_id is by_id
    assert plan.instance_id == ("i" if by_id else "")


def test_unknown_region_is_an_error_without_api_calls() -> None:
    clients = FakeClients({r: FakeRegion(r) for r in R})
    inst = Instances(clients, R)
    node = NodeRef("n", "openstack://Z/i")
    with pytest.raises(UnknownRegionError) as err:
        inst.instance_exists(node)
    assert str(err.value) == 'getInstance: ProviderID "openstack://Z/i" didn\'t match supported regions "A,B,C"'
    assert clients.calls() == []


@pytest.mark.parametrize("pid", ["aws:///i", "openstack://i"])
def test_foreign_or_malformed_provider_id_is_an_error(pid: str) -> None:
    clients = FakeClients({r: FakeRegion(r) for r in R})
    with pytest.raises(ProviderIDError):
        Instances(clients, R).instance_exists(NodeRef("n", pid))
    assert clients.calls() == []


def srv(id_: str, name: str = "node-1", status: str = "ACTIVE", **kw) -> Server:
    return Server(id=id_, name=name, status=status, **kw)


def test_by_id_404_moves_on() -> None:
    clients = FakeClients({"A": FakeRegion("A"), "B": FakeRegion("B", [srv("i")]), "C": FakeRegion("C")})
    found = Instances(clients, R).lookup(NodeRef("n", "openstack:///i"))
    assert found.region == "B"
    assert clients.calls() == [("A", "get_server", "i"), ("B", "get_server", "i")]  # C never asked


def test_by_id_error_stops_and_names_region() -> None:
    clients = FakeClients({"A": FakeRegion("A", down=True), "B": FakeRegion("B", [srv("i")]), "C": FakeRegion("C")})
    inst = Instances(clients, R)
    with pytest.raises(RegionError) as err:
        inst.instance_exists(NodeRef("n", "openstack:///i"))
    assert err.value.region == "A"
    assert "region A" in str(err.value)
    assert ("B", "get_server", "i") not in clients.calls()


def test_all_404_is_not_found() -> None:
    clients = FakeClients({r: FakeRegion(r) for r in R})
    inst = Instances(clients, R)
    assert inst.instance_exists(NodeRef("n", "openstack:///i")) is False
    with pytest.raises(InstanceNotFound, match="regions A,B,C"):
        inst.instance_shutdown(NodeRef("n", "openstack:///i"))


def test_region_missing_from_catalog_is_an_error_not_not_found() -> None:
    clients = FakeClients({r: FakeRegion(r) for r in R}, missing={"C"})
    inst = Instances(clients, R)
    with pytest.raises(RegionError, match="region C"):
        inst.instance_exists(NodeRef("n", "openstack:///i"))
    # ...while nodes known to live elsewhere are unaffected
    clients.regions["A"].servers.append(srv("j"))
    assert inst.instance_exists(NodeRef("n", "openstack://A/j")) is True
    assert inst.instance_exists(NodeRef("n", "openstack:///j")) is True


def test_down_region_behind_a_hit_does_not_matter() -> None:
    clients = FakeClients({"A": FakeRegion("A", [srv("i")]), "B": FakeRegion("B", down=True), "C": FakeRegion("C")})
    assert Instances(clients, R).instance_exists(NodeRef("n", "openstack:///i")) is True


def test_by_name() -> None:
    clients = FakeClients({r: FakeRegion(r) for r in R})
    inst = Instances(clients, R)
    node = NodeRef("node-1")
    assert inst.instance_exists(node) is False  # 0 everywhere: not found
    clients.regions["B"].servers.append(srv("b1"))
    assert inst.lookup(node).region == "B"  # 0 in A, 1 in B
    clients.regions["A"].servers.append(srv("a1"))
    assert inst.lookup(node).server.id == "a1"  # 1 in A and 1 in B: A wins
    assert inst.lookup(NodeRef("node-1", region_label="B")).server.id == "b1"  # label moves B first
    clients.regions["A"].servers.append(srv("a2"))
    with pytest.raises(MultipleResultsError, match="region A: multiple results where only one expected"):
        inst.lookup(node)
    assert inst.lookup(NodeRef("node-1", region_label="B")).server.id == "b1"  # duplicates only within a region


def test_by_name_down_region_is_an_error() -> None:
    clients = FakeClients({"A": FakeRegion("A"), "B": FakeRegion("B", down=True), "C": FakeRegion("C", [srv("c")])})
    with pytest.raises(RegionError, match="region B"):
        Instances(clients, R).instance_exists(NodeRef("node-1"))


@pytest.mark.parametrize(("status", "shut"), [("SHUTOFF", True), ("ACTIVE", False), ("ERROR", False),
                                              ("SUSPENDED", False), ("PAUSED", False), ("SHELVED_OFFLOADED", False)])
def test_shutdown_only_for_shutoff(status: str, shut: bool) -> None:
    clients = FakeClients({"A": FakeRegion("A", [srv("i", status=status)])})
    assert Instances(clients, ("A",)).instance_shutdown(NodeRef("n", "openstack:///i")) is shut


def test_shutdown_if_exists_is_one_lookup() -> None:
    clients = FakeClients({"A": FakeRegion("A", [srv("i", status="SHUTOFF"), srv("j")]), "B": FakeRegion("B")})
    inst = Instances(clients, ("A", "B"))
    assert inst.instance_shutdown_if_exists(NodeRef("n", "openstack:///i")) is True
    assert clients.calls() == [("A", "get_server", "i")]
    assert inst.instance_shutdown_if_exists(NodeRef("n", "openstack:///j")) is False
    assert inst.instance_shutdown_if_exists(NodeRef("n", "openstack:///k")) is None  # clean 404 everywhere
    clients.regions["B"].down = True
    with pytest.raises(RegionError, match="region B"):
        inst.instance_shutdown_if_exists(NodeRef("n", "openstack:///k"))


def metadata_world() -> FakeClients:
    server = srv(
        "i",
        availability_zone=" my zone! ",
        flavor={"id": "f1"},
        addresses={"net": (ServerAddress("10.0.0.5", "fixed"),), "ext": (ServerAddress("172.24.4.9", "floating"),)},
    )
    b = FakeRegion(
        "B",
        servers=[server],
        flavors={"f1": Flavor("f1", "m1.small")},
        ports=[Port("p1", "ACTIVE", ("10.0.0.5",), "n1", ("sp1",)), Port("sp1", "ACTIVE", ("192.168.9.5",), "n2")],
        device_ports={"i": ["p1"]},
        networks={"n2": Network("n2", "vlan-9")},
    )
    return FakeClients({"A": FakeRegion("A"), "B": b, "C": FakeRegion("C")})


@pytest.mark.parametrize(("regional", "pid"), [("true", "openstack://B/i"), ("", "openstack:///i")])
def test_metadata(regional: str, pid: str) -> None:
    inst = Instances(metadata_world(), R, NetworkingOptions(), environ={"OS_CCM_REGIONAL": regional})
    meta = inst.instance_metadata(NodeRef("node-1", "/i"))
    assert meta.to_dict() == {
        "providerID": pid,
        "instanceType": "m1.small",
        "zone": "my-zone",
        "region": "B",
        "addresses": [
            {"type": "InternalIP", "address": "10.0.0.5"},
            {"type": "ExternalIP", "address": "172.24.4.9"},
            {"type": "InternalIP", "address": "192.168.9.5"},
        ],
    }


def test_metadata_calls_stay_in_the_found_region() -> None:
    clients = metadata_world()
    Instances(clients, R, environ={}).instance_metadata(NodeRef("node-1", "", "B"))
    assert {region for region, _, _ in clients.calls()} == {"B"}


@pytest.mark.parametrize(
    ("flavor", "flavors", "expected"),
    [
        ({"original_name": "m1.small", "id": "x"}, {}, "m1.small"),  # no GET needed
        ({"original_name": "bad name!", "id": "f1"}, {"f1": Flavor("f1", "ok")}, "ok"),  # GET by name fails -> id
        ({"id": "f1"}, {"f1": Flavor("f1", "not a label!")}, "f1"),  # invalid name -> flavor ID
        # Nova >= 2.47 embeds the flavor without its id: found by name, its ID (what OCCM gives at 2.1)
        ({"original_name": "gpu large (x2)", "vcpus": 2}, {"f9": Flavor("f9", "gpu large (x2)")}, "f9"),
    ],
)
def test_instance_type(flavor: dict, flavors: dict, expected: str) -> None:
    clients = FakeClients({"A": FakeRegion("A", [srv("i", flavor=flavor)], flavors=flavors)})
    assert Instances(clients, ("A",), environ={}).instance_metadata(NodeRef("n", "/i")).instance_type == expected


def test_instance_type_not_found() -> None:
    clients = FakeClients({"A": FakeRegion("A", [srv("i", flavor={"id": "gone"})])})
    with pytest.raises(CCMError, match="flavor original_name/id not found"):
        Instances(clients, ("A",), environ={}).instance_metadata(NodeRef("n", "/i"))


def test_broken_subport_is_skipped() -> None:
    a = FakeRegion("A", [srv("i")], ports=[Port("p1", "ACTIVE", ("10.0.0.5",), subport_ids=("gone",))],
                   device_ports={"i": ["p1"]}, flavors={})
    a.servers[0] = srv("i", flavor={"original_name": "m1"})
    meta = Instances(FakeClients({"A": a}), ("A",), environ={}).instance_metadata(NodeRef("n", "/i"))
    assert meta.addresses == (NodeAddress("InternalIP", "10.0.0.5"),)


@pytest.mark.parametrize(("raw", "clean"), [("nova", "nova"), ("az 1", "az-1"), (" my zone! ", "my-zone"),
                                            ("", ""), ("-_.x._-", "x"), ("a" * 70, "a" * 63)])
def test_sanitize_label(raw: str, clean: str) -> None:
    assert sanitize_label(raw) == clean


def test_sanitize_does_not_retrim_after_cut() -> None:
    assert sanitize_label("a" * 62 + "-b") == "a" * 62 + "-"


@pytest.mark.parametrize(("value", "ok"), [("", True), ("m1.small", True), ("a" * 63, True), ("a" * 64, False),
                                           ("-a", False), ("a_", False), ("a b", False)])
def test_valid_label_value(value: str, ok: bool) -> None:
    assert is_valid_label_value(value) is ok


regions_st = st.lists(st.sampled_from("ABCDE"), min_size=1, max_size=5, unique=True).map(tuple)


@given(regions_st, st.sampled_from(["", "A", "B", "Z"]), st.sampled_from(["", "/i", "openstack:///i"]))
def test_plan_is_a_reordering_of_all_regions(regions: tuple[str, ...], label: str, pid: str) -> None:
    plan = plan_search(NodeRef("n", pid, label), regions)
    assert sorted(plan.regions) == sorted(regions)
    assert plan.regions[0] == (label if label in regions else regions[0])


@given(regions_st, st.dictionaries(st.sampled_from("ABCDE"), st.sampled_from(["404", "hit", "down"])))
def test_not_found_only_when_every_region_answered(regions: tuple[str, ...], behaviour: dict[str, str]) -> None:
    fakes = {
        r: FakeRegion(r, [srv("i")] if behaviour.get(r) == "hit" else [], down=behaviour.get(r) == "down")
        for r in regions
    }
    try:
        exists = Instances(FakeClients(fakes), regions).instance_exists(NodeRef("n", "/i"))
    except RegionError as exc:
        assert behaviour.get(exc.region) == "down"
        return
    first = next((behaviour.get(r, "404") for r in regions if behaviour.get(r, "404") != "404"), "404")
    assert exists is (first == "hit")
    if not exists:
        assert all(behaviour.get(r, "404") == "404" for r in regions)
