"""port_sync as a batch: a burst's ports cost a list and a bulk create per
region, and one port's refusal is that port's job's alone."""

from __future__ import annotations

import builtins
from collections.abc import Collection, Iterable
from typing import Any, cast

import pytest

from isthmus.clients import Rejected, Unavailable
from isthmus.jobs import Batch, JobContext, RetryLater
from isthmus.network import PROFILE_KEY
from isthmus.network.jobtypes import port_sync_payload
from isthmus.network.reconcilers import plans
from isthmus.network.reconcilers.ovn.access import OvnAccess
from isthmus.network.reconcilers.port_sync import PortSync, PortWriter
from isthmus.network.reconcilers.regions import Regions
from isthmus.network.reconcilers.shadows import ShadowPolicy
from isthmus.network.reconcilers.topology import Topology
from isthmus.registry import Registry, Tombstones

NET = "net-1"
REGIONS = ("R1", "R2", "R3")


def vm(n: int, region: str = "R1") -> dict[str, Any]:
    return {"id": f"port-{n:03d}", "network_id": NET, "project_id": "p", "mac_address": f"fa:16:3e:00:00:{n:02x}",
            "fixed_ips": [{"subnet_id": "s", "ip_address": f"10.0.0.{n}"}], "device_owner": "compute:nova",
            "device_id": f"vm-{n}", "binding:host_id": f"{region}-compute",
            "binding:profile": {PROFILE_KEY: {"region": region}}}


class FakeNeutron:
    """Ports, with Neutron's all-or-nothing bulk create; ``refuse``: MACs whose
    create this region refuses (400); ``down``: every call is Unavailable."""

    def __init__(self, region: str, ports: Iterable[dict] = (), refuse: Collection[str] = frozenset(),
                 down: bool = False) -> None:
        self.region = region
        self.ports = {p["id"] + p["device_owner"]: dict(p) for p in ports}
        self.refuse = refuse
        self.down = down
        self.calls: list[tuple] = []

    def _call(self, *what: Any) -> None:
        self.calls.append(what)
        if self.down:
            raise Unavailable(f"{self.region} down")

    def list(self, collection: str, **filters: Any) -> list[dict]:
        self._call("list", collection)
        found = list(self.ports.values())
        for key, wanted in filters.items():
            wanted = set(wanted) if isinstance(wanted, list) else {wanted}
            found = [p for p in found if p.get(key) in wanted]
        return found

    def get(self, collection: str, obj_id: str) -> dict | None:
        self._call("get", collection)
        return next((p for p in self.ports.values() if p["id"] == obj_id), None)

    def _make(self, body: dict) -> dict:
        if body["mac_address"] in self.refuse:
            raise Rejected(400, f"bad port {body['mac_address']}")
        port = dict(body, id=plans.shadow_of(body) or body["name"])
        if any(p["id"] == port["id"] or (p["network_id"], p["mac_address"]) == (port["network_id"],
                                                                               port["mac_address"])
               for p in self.ports.values()):
            raise Rejected(409, "MacAddressInUse")  # Neutron: a copy or shadow holds its MAC (or id)
        return port

    def create_many(self, collection: str, bodies: builtins.list[dict]) -> builtins.list[dict]:
        self._call("create_many", collection, len(bodies))
        made = [self._make(b) for b in bodies]  # all or nothing
        for port in made:
            self.ports[port["id"] + port["device_owner"]] = port
        return made

    def create(self, collection: str, body: dict) -> dict:
        self._call("create", collection)
        port = self._make(body)
        self.ports[port["id"] + port["device_owner"]] = port
        return port

    def update(self, collection: str, obj_id: str, changes: dict, if_revision: int | None = None) -> dict:
        self._call("update", collection)
        (port,) = [p for p in self.ports.values() if p["id"] == obj_id]
        port.update(changes)
        return port

    def delete(self, collection: str, obj_id: str, if_revision: int | None = None) -> bool:
        self._call("delete", collection)
        keys = [k for k, p in self.ports.items() if p["id"] == obj_id]
        for key in keys:
            del self.ports[key]
        return bool(keys)

    def shadows(self) -> builtins.set[str]:
        return {p["id"] for p in self.ports.values() if plans.is_shadow(p)}


class FakeTopology:
    """Every region routed."""

    def __init__(self, regions: Iterable[str]) -> None:
        self.names = list(regions)

    def regions(self) -> list[str]:
        return self.names

    def routed_regions(self, network_id: str) -> set[str]:
        return set(self.names)


class FakeCloud:
    """Central and the regions, standing in for the collaborators PortSync takes:
    Regions (central, neutron), Tombstones (``buried``), ShadowPolicy (every
    network wants shadows, every region binds them) and Registry (no pods)."""

    def __init__(self, central: FakeNeutron, regions: dict[str, FakeNeutron], buried: Collection[str] = ()):
        self.central = central
        self.regions = regions
        self.buried = buried
        self.routings: list[tuple[str, str]] = []  # (group, pod) as ensure_routing recorded them

    def neutron(self, region: str) -> FakeNeutron:
        return self.regions[region]

    def is_buried(self, kind: str, obj_id: str) -> bool:
        return obj_id in self.buried

    def network_wants_shadows(self, network_id: str) -> bool:
        return True

    def binds_shadows(self, region: str) -> bool:
        return True

    def find_pod(self, region: str) -> Any:
        return type("Pod", (), {"pod_id": f"pod-{region}"})()

    def ensure_routing(self, top_id: str, bottom_id: str, pod_id: str, project_id: str, kind: str) -> None:
        assert kind == "security_group"
        self.routings.append((top_id, pod_id))

    def port_sync(self) -> PortSync:
        regions = cast(Regions, self)
        return PortSync(regions, cast(Topology, FakeTopology(self.regions)), cast(Tombstones, self),
                        cast(ShadowPolicy, self), OvnAccess(), PortWriter(regions, cast(Registry, self)))


def batch_of(*port_ids: str, payloads: dict[str, dict] | None = None) -> Batch:
    return Batch("port_sync", tuple(
        JobContext(job_id=f"job-{pid}", job_type="port_sync", resource_id=pid, project_id="p",
                   payload=(payloads or {}).get(pid, {}), attempt=1)
        for pid in port_ids))


def cloud(ports: list[dict], **regional: dict) -> FakeCloud:
    """Central with ``ports``; each region holds its own bound ports' copies."""
    regions = {r: FakeNeutron(r, [p for p in ports if p["binding:profile"][PROFILE_KEY]["region"] == r],
                              **regional.get(r, {}))
               for r in REGIONS}
    return FakeCloud(FakeNeutron("central", ports), regions)


def run(world: FakeCloud, batch: Batch) -> None:
    world.port_sync().run(batch)


def test_a_burst_of_ports_costs_one_list_and_one_bulk_create_per_region():
    ports = [vm(n) for n in range(1, 41)]
    world = cloud(ports)
    batch = batch_of(*(p["id"] for p in ports))
    run(world, batch)
    assert world.central.calls == [("list", "ports")]
    for region in ("R2", "R3"):
        assert world.regions[region].shadows() == {p["id"] for p in ports}
        assert world.regions[region].calls == [("create_many", "ports", 40)]  # new: no read first
    assert world.regions["R1"].calls == [("list", "ports")]  # bound there: its copy read, no shadow
    assert all(batch.outcome(ctx) is None for ctx in batch)  # every job succeeds


def test_a_first_bind_costs_nothing_in_its_own_region():
    ports = [vm(1, "R1"), vm(2, "R1"), vm(3, "R2")]
    world = cloud(ports)
    fresh = port_sync_payload(NET, "m", fresh_bind_in="R1")
    batch = batch_of(*(p["id"] for p in ports), payloads={"port-001": fresh, "port-002": fresh})
    run(world, batch)
    assert world.regions["R1"].calls == [("create_many", "ports", 1)]  # only port-003's shadow
    assert world.regions["R2"].calls == [("list", "ports"), ("create_many", "ports", 2)]  # port-003: no hint
    assert world.regions["R3"].shadows() == {p["id"] for p in ports}
    assert all(batch.outcome(ctx) is None for ctx in batch)


def test_the_first_bind_hint_is_ignored_once_the_port_is_bound_elsewhere():
    moved = vm(1, "R2")  # the hint came with a bind in R1; central now says R2
    world = cloud([moved])
    world.regions["R1"].create("ports", plans.shadow_body(vm(9, "R3")))  # unrelated
    world.regions["R1"].calls.clear()
    run(world, batch_of("port-001", payloads={"port-001": port_sync_payload(NET, "m", fresh_bind_in="R1")}))
    assert world.regions["R1"].shadows() >= {"port-001"}  # R1 is not its region: it gets its shadow
    assert world.regions["R2"].calls == [("list", "ports")]  # its own region, not fresh there: read


def test_one_refused_shadow_fails_its_own_job_and_the_others_are_made():
    ports = [vm(n) for n in range(1, 6)]
    world = cloud(ports, R3={"refuse": {ports[2]["mac_address"]}})
    batch = batch_of(*(p["id"] for p in ports))
    run(world, batch)
    assert world.regions["R3"].shadows() == {p["id"] for p in ports} - {ports[2]["id"]}
    assert world.regions["R2"].shadows() == {p["id"] for p in ports}
    failed = {ctx.resource_id: batch.outcome(ctx) for ctx in batch if batch.outcome(ctx) is not None}
    assert list(failed) == [ports[2]["id"]]
    outcome = failed[ports[2]["id"]]
    assert outcome is not None and outcome.name == "failed" and "R3" in (outcome.reason or "")


def test_shadows_made_meanwhile_converge_without_a_failure():
    ports = [vm(n) for n in range(1, 4)]
    world = cloud(ports)
    world.regions["R2"].create("ports", plans.shadow_body(ports[1]))  # another run made one
    world.regions["R2"].calls.clear()
    batch = batch_of(*(p["id"] for p in ports))
    run(world, batch)
    assert world.regions["R2"].shadows() == {p["id"] for p in ports}
    assert all(batch.outcome(ctx) is None for ctx in batch)


def test_a_region_down_retries_the_batch_and_the_others_are_wired():
    ports = [vm(n) for n in range(1, 4)]
    world = cloud(ports, R3={"down": True})
    batch = batch_of(*(p["id"] for p in ports))
    run(world, batch)
    assert world.regions["R2"].shadows() == {p["id"] for p in ports}
    assert {batch.outcome(ctx).name for ctx in batch} == {"retry_later"}  # type: ignore[union-attr]


def test_central_down_retries_every_job_and_touches_no_region():
    ports = [vm(n) for n in range(1, 4)]
    world = cloud(ports)
    world.central.down = True
    batch = batch_of(*(p["id"] for p in ports))
    with pytest.raises(RetryLater, match="central"):  # every unmarked job gets that outcome
        run(world, batch)
    assert all(not n.calls for n in world.regions.values())


def test_a_port_missing_at_central_is_proof_only_with_its_tombstone():
    ports = [vm(1), vm(2)]
    world = cloud(ports)
    run(world, batch_of("port-001", "port-002"))
    assert world.regions["R2"].shadows() == {"port-001", "port-002"}
    world.central.ports.clear()  # central lists neither now; only port-001's delete is recorded
    world.buried = {"port-001"}
    payloads = {p["id"]: {"network_id": NET, "macs": [p["mac_address"]]} for p in ports}
    run(world, batch_of("port-001", "port-002", payloads=payloads))
    assert world.regions["R2"].shadows() == {"port-002"}
    assert world.regions["R3"].shadows() == {"port-002"}


def test_a_port_that_moved_is_read_first_where_its_old_copy_or_shadow_is():
    port = vm(1, "R2")
    world = cloud([port])
    run(world, batch_of(port["id"]))
    assert world.regions["R1"].shadows() == world.regions["R3"].shadows() == {port["id"]}
    moved = vm(1, "R3")  # Nova moved it: bound in R3 now; R2 still holds its unbound copy
    world.central.ports = {moved["id"] + moved["device_owner"]: moved}
    world.regions["R2"].ports[port["id"] + port["device_owner"]]["binding:host_id"] = ""
    # R3 holds the port itself now (one port per id: its shadow made way for it).
    world.regions["R3"].ports = {moved["id"] + moved["device_owner"]: dict(moved)}
    for fake in world.regions.values():
        fake.calls.clear()
    batch = batch_of(moved["id"])
    run(world, batch)
    # R1's stale shadow (host in R2) refused the blind create: read, replaced.
    assert world.regions["R1"].calls[:2] == [("create_many", "ports", 1), ("list", "ports")]
    (shadow,) = [p for p in world.regions["R1"].ports.values() if plans.is_shadow(p)]
    assert shadow["binding:host_id"] == moved["binding:host_id"]
    # R2: its old copy (unbound) refused the shadow; read, the copy goes, the shadow comes.
    assert world.regions["R2"].shadows() == {port["id"]}
    assert world.regions["R3"].calls == [("list", "ports")]  # its own region: read, nothing to do
    assert all(batch.outcome(ctx) is None for ctx in batch)


def test_shadows_carry_their_ports_groups_and_follow_a_change_with_one_update():
    """A region counts a shadow as a member of the groups it holds, so the groups
    go with it, routed to the region (security_group_sync keeps the copies); a
    group change updates the shadow in place, once per worker routing each group."""
    port = {**vm(1), "security_groups": ["sg-a"]}
    world = cloud([port])
    sync = world.port_sync()
    sync.run(batch_of("port-001"))
    for region in ("R2", "R3"):
        (shadow,) = [p for p in world.regions[region].ports.values() if plans.is_shadow(p)]
        assert (shadow["security_groups"], shadow["port_security_enabled"]) == (["sg-a"], True)
    assert sorted(world.routings) == [("sg-a", "pod-R2"), ("sg-a", "pod-R3")]
    world.central.ports["port-001compute:nova"]["security_groups"] = ["sg-a", "sg-b"]
    for fake in world.regions.values():
        fake.calls.clear()
    sync.run(batch_of("port-001"))
    for region in ("R2", "R3"):
        calls = world.regions[region].calls
        assert ("update", "ports") in calls and ("get", "security-groups") in calls, calls  # sg-b copied first
        assert world.regions[region].ports["port-001compute:shadow"]["security_groups"] == ["sg-a", "sg-b"]
    # Each (group, region) routed once: R1's copy brings sg-b there too.
    assert sorted(world.routings) == [("sg-a", f"pod-{r}") for r in ("R2", "R3")] + [
        ("sg-b", f"pod-{r}") for r in REGIONS]
