"""binding_sync: central's binding record repaired from a region's own state,
and deletes only on proof (pure logic over in-memory stand-ins of the REST client)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from isthmus.clients import Unavailable
from isthmus.jobs import JobContext
from isthmus.network import PROFILE_KEY
from isthmus.network.reconcilers.binding_sync import sync_bindings

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
        if collection == "agents":
            return []
        return [p for p in self.ports if all(p.get(k) == v for k, v in filters.items() if k != "fields")]

    def update(self, collection, port_id, report, if_revision=None):
        self.updates.append((port_id, report))

    def delete(self, collection, port_id):
        self.deletes.append(port_id)


@dataclass
class Pod:
    region_name: str


class Services:
    def __init__(self, central: Neutron, regions: dict[str, Neutron]) -> None:
        self.central = central
        self.regions = regions
        self.registry = self

    def neutron(self, region):
        return self.regions[region]

    def regional_pods(self):
        return [Pod(r) for r in self.regions]


def port(port_id, region=None, host="", updated=OLD):
    profile = {PROFILE_KEY: {"region": region}} if region else {}
    return {"id": port_id, "network_id": "n", "mac_address": f"fa:16:3e:00:00:{port_id[-1]}0",
            "device_owner": "compute:az", "device_id": "vm", "binding:host_id": host,
            "binding:profile": profile, "revision_number": 3, "updated_at": updated}


def run(services, region="RegionOne"):
    sync_bindings(services, JobContext("j", "binding_sync", region, None, {}, 1))


def test_a_bind_central_missed_is_reported_and_an_unbind_too():
    central = Neutron([port("p1"), port("p2", "RegionOne", "h1")])
    one = Neutron([port("p1", host="h1"), port("p2")])  # p1 bound here, p2 unbound here
    run(Services(central, {"RegionOne": one}))
    reports = dict(central.updates)
    assert reports["p1"]["binding:host_id"] == "h1"
    assert reports["p1"]["binding:profile"][PROFILE_KEY]["region"] == "RegionOne"
    assert reports["p2"]["binding:host_id"] == "" and central.deletes == []


def test_a_port_deleted_here_while_central_was_down_goes_at_central_only_on_proof():
    central = Neutron([port("p1", "RegionOne", "h1"), port("p2", "RegionOne", "h1", updated=just_now()),
                       port("p3", "RegionOne", "h1")])
    two = Neutron([port("p3", host="h2")])  # p3 moved to RegionTwo, its report lost too
    run(Services(central, {"RegionOne": Neutron([]), "RegionTwo": two}))
    # p1: gone here, nowhere else, settled -> deleted; p2: changed at central moments ago; p3: held elsewhere
    assert central.deletes == ["p1"]


def test_an_unreachable_region_is_no_proof_and_two_owners_are_left_alone():
    central = Neutron([port("p1", "RegionOne", "h1"), port("p2", "RegionTwo", "h2")])
    one = Neutron([port("p2", host="h1")])  # RegionOne and RegionTwo both hold p2 bound
    run(Services(central, {"RegionOne": one, "RegionTwo": Neutron(down=True)}))
    assert central.deletes == [] and central.updates == []
