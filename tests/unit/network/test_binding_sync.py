"""binding_sync: central's binding record repaired from a region's own state,
and deletes only on proof (pure logic over in-memory stand-ins of the REST clients)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from isthmus.clients import Rejected, Unavailable
from isthmus.jobs import JobContext, PermanentFailure
from isthmus.jobs.models import HINTS
from isthmus.network import PROFILE_KEY, jobtypes
from isthmus.network.reconcilers.binding_sync import PORTS, BindingSync, SharedRead
from isthmus.network.reconcilers.ovn.access import OvnAccess
from isthmus.network.reconcilers.regions import Regions
from isthmus.network.reconcilers.settings import DeleteBrake
from isthmus.network.reconcilers.topology import Topology

OLD = (datetime.now(UTC) - timedelta(hours=1)).isoformat()


def just_now() -> str:
    """Taken when the test runs (a module-level stamp is old by then in a long run)."""
    return datetime.now(UTC).isoformat()


@dataclass
class Neutron:
    ports: list[dict] = field(default_factory=list)
    down: bool = False
    updates: list[tuple[str, dict]] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)

    def list(self, collection, **filters):
        if self.down:
            raise Unavailable("down")
        self.lists += 1
        if collection == "agents":
            return []
        return [p for p in self.ports if all(p.get(k) == v for k, v in filters.items() if k != "fields")]

    def update(self, collection, port_id, report, if_revision=None):
        self.updates.append((port_id, report))

    lists: int = 0  # list calls answered
    changed: set[str] = field(default_factory=set)  # ports changed since any read: a conditional write fails

    def delete(self, collection, port_id, if_revision=None):
        if if_revision is not None and port_id in self.changed:
            raise Rejected(412, "revision changed")
        self.deletes.append(port_id)


@dataclass
class Region(Neutron):
    """A regional Neutron: a read by id of a port central has copies it (the local plugin's way)."""

    central: Neutron | None = None

    def get(self, collection, port_id):
        top = next((p for p in self.central.ports if p["id"] == port_id), None) if self.central else None
        if top is None:
            return None
        copy = {**top, "binding:host_id": "", "binding:profile": {}}
        self.ports.append(copy)
        return copy


@dataclass
class Nova:
    servers: set[str] = field(default_factory=set)
    down: bool = False

    def server_gone(self, server_id):
        if self.down:
            raise Unavailable("nova down")
        return server_id not in self.servers


class FakeRegions:
    """Central, the regions' Neutrons and Novas, as :class:`Regions` gives them."""

    def __init__(self, central: Neutron, regions: dict[str, Neutron], novas: dict[str, Nova]) -> None:
        self.central = central
        self.regions = regions
        self.novas = novas

    def neutron(self, region):
        return self.regions[region]

    def nova(self, region):
        return self.novas.setdefault(region, Nova())


class FakeTopology:
    def __init__(self, regions: dict[str, Neutron]) -> None:
        self._regions = regions

    def regions(self):
        return list(self._regions)


def binding_sync(central: Neutron, regions: dict[str, Neutron], novas: dict[str, Nova] | None = None,
                 brake: DeleteBrake | None = None) -> BindingSync:
    """The handler over in-memory regions; ML2/OVS only (no OVN access)."""
    return BindingSync(cast(Regions, FakeRegions(central, regions, novas or {})),
                       cast(Topology, FakeTopology(regions)), brake or DeleteBrake(share=1.0),
                       timedelta(minutes=2), OvnAccess())


def port(port_id, region=None, host="", updated=OLD, device="vm"):
    profile = {PROFILE_KEY: {"region": region}} if region else {}
    return {"id": port_id, "network_id": "n", "mac_address": f"fa:16:3e:00:00:{port_id[-1]}0",
            "device_owner": "compute:az", "device_id": device, "binding:host_id": host,
            "binding:profile": profile, "revision_number": 3, "updated_at": updated}


def run(handler: BindingSync, region="RegionOne", payload: dict | None = None):
    handler.run(JobContext("j", "binding_sync", region, None, payload or {}, 1))


PERIODIC = {HINTS: {jobtypes.BACKSTOP_ONLY: True}}


def test_the_periodic_passes_of_the_regions_share_one_list_of_central_and_the_others_read_now():
    central = Neutron([port("p1", "RegionOne", "h1"), port("p2", "RegionTwo", "h2")])
    regions = {"RegionOne": Neutron([port("p1", host="h1")]), "RegionTwo": Neutron([port("p2", host="h2")])}
    handler = binding_sync(central, regions)
    run(handler, "RegionOne", PERIODIC)
    run(handler, "RegionTwo", PERIODIC)
    assert central.lists == 1
    run(handler, "RegionTwo")  # an operator's or an event's run
    assert central.lists == 2


def test_a_shared_read_serves_its_ttl_and_keeps_no_failure():
    now = [0.0]
    shared = SharedRead(10.0, clock=lambda: now[0])
    reads: list[int] = []

    def read() -> list[dict]:
        reads.append(1)
        if len(reads) == 3:
            raise Unavailable("central down")
        return [{"read": len(reads)}]

    assert shared.get(read) == [{"read": 1}]
    now[0] = 10.0
    assert shared.get(read) == [{"read": 1}] and len(reads) == 1
    now[0] = 10.5
    assert shared.get(read) == [{"read": 2}]
    now[0] = 21.0
    with pytest.raises(Unavailable):
        shared.get(read)
    assert shared.get(read) == [{"read": 4}]  # the failure was not kept


def test_a_delete_on_novas_word_is_conditional_on_the_revision_the_pass_read():
    """The list a pass plans from may be seconds old (shared between regions): a
    port changed at central since is left for the next pass, not deleted."""
    central = Neutron([port("p1", "RegionOne", "h1", device="vm1"), port("p2", "RegionOne", "h1", device="vm2")],
                      changed={"p2"})
    run(binding_sync(central, {"RegionOne": Region(central=central)}, {"RegionOne": Nova()}))
    assert central.deletes == ["p1"]


def test_a_bind_central_missed_is_reported_and_an_unbind_too():
    central = Neutron([port("p1"), port("p2", "RegionOne", "h1")])
    one = Neutron([port("p1", host="h1"), port("p2")])  # p1 bound here, p2 unbound here
    run(binding_sync(central, {"RegionOne": one}))
    reports = dict(central.updates)
    assert reports["p1"]["binding:host_id"] == "h1"
    assert reports["p1"]["binding:profile"][PROFILE_KEY]["region"] == "RegionOne"
    assert reports["p2"]["binding:host_id"] == "" and central.deletes == []


def test_a_bind_made_within_the_grace_is_left_to_the_regions_own_report():
    """Before: a pass that listed central just before a bind's report landed sent
    the same report again, and central's change (and its jobs) ran twice."""
    central = Neutron([port("p1"), port("p2", "RegionOne", "h1")])
    one = Neutron([port("p1", host="h1", updated=just_now()), port("p2", updated=just_now())])
    run(binding_sync(central, {"RegionOne": one}))
    assert central.updates == []


def _counted(action: str) -> float:
    return PORTS.labels("RegionOne", action)._value.get()


def test_a_port_the_region_lacks_goes_at_central_only_on_novas_word():
    central = Neutron([port("p1", "RegionOne", "h1", device="vm1"),
                       port("p2", "RegionOne", "h1", updated=just_now(), device="vm2"),
                       port("p3", "RegionOne", "h1", device="vm3")])
    two = Neutron([port("p3", host="h2")])  # p3 moved to RegionTwo, its report lost too
    before = _counted("deleted")
    run(binding_sync(central, {"RegionOne": Region(central=central), "RegionTwo": two}, {"RegionOne": Nova()}))
    # p1: gone here, its server gone; p2: changed at central moments ago; p3: held elsewhere
    assert central.deletes == ["p1"]
    assert _counted("deleted") - before == 1


def test_a_region_restored_from_a_backup_gets_its_copies_back_bound_and_central_loses_nothing():
    """Issue 25 hole 1: the region's Neutron lost ports it had (a restore), Nova
    still has their servers. Before: binding_sync deleted them at central."""
    central = Neutron([port("p1", "RegionOne", "h1", device="vm1"), port("p2", "RegionOne", "h2", device="vm2"),
                       port("p3", "RegionOne", "h1", device="")])  # p3: bound, no server
    one = Region(central=central)
    before = _counted("restored")
    run(binding_sync(central, {"RegionOne": one}, {"RegionOne": Nova({"vm1", "vm2"})}))
    assert central.deletes == []
    assert sorted(p["id"] for p in one.ports) == ["p1", "p2", "p3"]
    assert _counted("restored") - before == 3
    assert {(port_id, body["binding:host_id"]) for port_id, body in one.updates} == {
        ("p1", "h1"), ("p2", "h2"), ("p3", "h1")}


def test_nova_down_is_no_proof_either_way():
    central = Neutron([port("p1", "RegionOne", "h1", device="vm1")])
    one = Region(central=central)
    run(binding_sync(central, {"RegionOne": one}, {"RegionOne": Nova(down=True)}))
    assert central.deletes == [] and one.ports == []


def test_the_brake_deletes_none_of_a_mass_loss_and_names_them():
    bound = [port(f"p{i}", "RegionOne", "h1", device=f"vm{i}") for i in range(10)]
    kept = port("pk", "RegionOne", "h1", device="vm-kept")  # its server is there: copied back all the same
    central = Neutron([*bound, kept])
    one = Region(central=central)
    before = _counted("braked")
    handler = binding_sync(central, {"RegionOne": one}, {"RegionOne": Nova({"vm-kept"})},
                           DeleteBrake(share=0.1, floor=3))
    with pytest.raises(PermanentFailure, match="10 of the 11 ports bound there") as failure:
        run(handler)
    assert "p7" in str(failure.value) and "binding_sync_delete_share" in str(failure.value)
    assert central.deletes == []
    assert _counted("braked") - before == 10
    assert [p["id"] for p in one.ports] == ["pk"]  # the pass's restores still happen


@pytest.mark.parametrize(("deletes", "bound", "allowed"), [
    (3, 3, True), (4, 10, False), (10, 100, True), (11, 100, False), (0, 0, True)])
def test_the_brake_allows_the_floor_or_the_share(deletes, bound, allowed):
    assert DeleteBrake(share=0.1, floor=3).allows(deletes, bound) is allowed


def test_an_unreachable_region_is_no_proof_and_two_owners_are_left_alone():
    central = Neutron([port("p1", "RegionOne", "h1"), port("p2", "RegionTwo", "h2")])
    one = Neutron([port("p2", host="h1")])  # RegionOne and RegionTwo both hold p2 bound
    run(binding_sync(central, {"RegionOne": one, "RegionTwo": Neutron(down=True)}))
    assert central.deletes == [] and central.updates == []
