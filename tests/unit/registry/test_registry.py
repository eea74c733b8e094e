import pytest

from isthmus.db import make_engine
from isthmus.registry import Conflict, Invalid, NotFound, Registry, UnknownAvailabilityZone, create_schema


@pytest.fixture
def registry(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'isthmus.sqlite'}")
    create_schema(engine)
    return Registry(engine)


@pytest.fixture
def pods(registry):
    return (registry.create_pod("CentralRegion"), registry.create_pod("RegionOne", "az1"),
            registry.create_pod("RegionTwo", "az2"), registry.create_pod("RegionThree", "az2"))


def test_central_pod_is_unique(registry):
    central = registry.create_pod("CentralRegion")
    assert central.is_central and central.az_name == ""
    with pytest.raises(Conflict, match="central pod exists"):
        registry.create_pod("OtherCentral")


def test_duplicate_region_and_missing_region_are_rejected(registry):
    registry.create_pod("RegionOne", "az1")
    with pytest.raises(Conflict, match="region_name"):
        registry.create_pod("RegionOne", "az9")
    with pytest.raises(Invalid, match="region_name: is required"):
        registry.create_pod("  ", "az1")


def test_hints_resolve_to_regions(registry, pods):
    assert registry.regions_for_hints([]) == ["RegionOne", "RegionThree", "RegionTwo"]
    assert registry.regions_for_hints(["az1"]) == ["RegionOne"]
    assert registry.regions_for_hints(["az2"]) == ["RegionThree", "RegionTwo"]
    assert registry.regions_for_hints(["RegionTwo", "az1"]) == ["RegionTwo", "RegionOne"]
    with pytest.raises(UnknownAvailabilityZone, match="'nope'"):
        registry.regions_for_hints(["az1", "nope"])
    with pytest.raises(UnknownAvailabilityZone):
        registry.regions_for_hints(["CentralRegion"])  # central holds no copies


def test_routing_pages_newest_first_and_rejects_bad_input(registry, pods):
    pod = pods[1]
    made = [registry.create_routing(f"top-{i}", f"bottom-{i}", pod.pod_id, "p1", "network") for i in range(5)]
    page = registry.list_routings(limit=2)
    assert [r.id for r in page] == [made[4].id, made[3].id]
    assert [r.id for r in registry.list_routings(limit=2, marker=page[-1].id)] == [made[2].id, made[1].id]
    with pytest.raises(NotFound):
        registry.list_routings(marker=9999)
    with pytest.raises(Invalid, match="unsupported filter"):
        registry.list_routings({"colour": "red"})
    with pytest.raises(Conflict):
        registry.create_routing("top-0", "x", pod.pod_id, "p1", "network")
    with pytest.raises(Invalid, match="resource_type"):
        registry.create_routing("t", "b", pod.pod_id, "p1", "volcano")
    with pytest.raises(Invalid, match="pod_id"):
        registry.create_routing("t", "b", "no-such-pod", "p1", "network")


def test_ensure_routing_is_idempotent(registry, pods):
    pod = pods[2]
    first = registry.ensure_routing("net", "net", pod.pod_id, "p1", "network")
    again = registry.ensure_routing("net", "net", pod.pod_id, "p1", "network")
    assert first.id == again.id
    assert [r.pod_id for r in registry.routings_of("net", "network")] == [pod.pod_id]
    assert registry.forget("net", "network") == 1
    assert registry.routings_of("net", "network") == []


def test_deleting_a_pod_drops_its_routings(registry, pods):
    pod = pods[1]
    registry.create_routing("net", "net", pod.pod_id, "p1", "network")
    registry.delete_pod(pod.pod_id)
    assert registry.routings_of("net", "network") == []
    with pytest.raises(NotFound):
        registry.get_pod(pod.pod_id)


def test_remove_pod_waits_for_what_users_own_and_then_drops_the_copies(registry, pods, capsys):
    """``isthmus operator remove-pod`` (the Job the operator runs when a Region is deleted)."""
    from isthmus.cli.main import main

    _, one, two, _ = pods
    url = str(registry.engine.url)
    registry.ensure_routing("net-1", "net-1", two.pod_id, "p", "network")  # Isthmus' copy: does not hold
    registry.ensure_routing("port-1", "port-1", two.pod_id, "p", "port")  # a server's port bound there
    registry.ensure_routing("vol-1", "vol-1", two.pod_id, "p", "volume")
    registry.ensure_routing("port-2", "port-2", one.pod_id, "p", "port")  # another region's: irrelevant
    assert main(["operator", "remove-pod", "--db-url", url, "RegionTwo"]) == 3
    err = capsys.readouterr().err
    assert "region RegionTwo still holds 1 port (port-1); 1 volume (vol-1)" in err
    assert registry.find_pod("RegionTwo") is not None
    for top in ("port-1", "vol-1"):  # the users' objects go
        registry.forget(top, "port" if top.startswith("port") else "volume", two.pod_id)
    assert main(["operator", "remove-pod", "--db-url", url, "RegionTwo"]) == 0
    assert registry.find_pod("RegionTwo") is None
    assert registry.routings_of("net-1", "network") == []  # the copies' routings went with it
    assert [r.pod_id for r in registry.routings_of("port-2", "port")] == [one.pod_id]
    assert main(["operator", "remove-pod", "--db-url", url, "RegionTwo"]) == 0  # again: nothing to do
    assert "not registered" in capsys.readouterr().out
