"""sg_member_sync and the address-group helpers against a fake Neutron."""

import itertools
from typing import cast

from isthmus.clients import NeutronClient, Rejected, Unavailable
from isthmus.jobs import Batch, JobContext
from isthmus.network import PROFILE_KEY, jobtypes
from isthmus.network.central import mech_driver
from isthmus.network.reconcilers import address_groups as ag
from isthmus.network.reconcilers import sg_members
from isthmus.network.reconcilers.regions import Regions
from isthmus.network.reconcilers.shadows import ShadowPolicy
from isthmus.network.reconcilers.topology import Topology

S = "11111111-1111-1111-1111-111111111111"
REMOTE = {"id": "r1", "direction": "ingress", "ethertype": "IPv4", "protocol": None, "port_range_min": None,
          "port_range_max": None, "remote_ip_prefix": None, "remote_group_id": S, "description": ""}
GROUP = {"id": S, "project_id": "p", "name": "default", "security_group_rules": [REMOTE]}
_ids = itertools.count(1)


def _vm(port_id, ip, region, network="n"):
    return {"id": port_id, "project_id": "p", "device_owner": "compute:az", "security_groups": [S],
            "network_id": network,
            "fixed_ips": [{"subnet_id": "s", "ip_address": ip}], "binding:host_id": "h",
            "binding:profile": {PROFILE_KEY: {"region": region}}}


class FakeNeutron:
    """Address groups and security groups with Neutron's refusals."""

    def __init__(self, region, groups=(), ports=()):
        self.region = region
        self.address_groups = {}
        self.groups = {g["id"]: dict(g, security_group_rules=[dict(r) for r in g["security_group_rules"]])
                       for g in groups}
        self.ports = list(ports)
        self.calls = []

    def get(self, collection, obj_id):
        store = self.address_groups if collection == "address-groups" else self.groups
        found = store.get(obj_id)
        return {**found, "addresses": sorted(found["addresses"])} if collection == "address-groups" and found \
            else found

    def list(self, collection, **filters):
        self.calls.append(("list", collection))
        if collection == "ports":  # Neutron matches any of several fixed_ips filters
            wanted = filters.get("fixed_ips", [])
            ips = {f.split("=", 1)[1] for f in ([wanted] if isinstance(wanted, str) else wanted)}
            return [p for p in self.ports if not ips or any(i["ip_address"] in ips for i in p["fixed_ips"])]
        names = filters.get("name")
        names = [names] if isinstance(names, str) else names
        return [self.get(collection, i) for i, a in self.address_groups.items()
                if (names is None or a["name"] in names)
                and filters.get("project_id", a["project_id"]) == a["project_id"]]

    def create(self, collection, body):
        self.calls.append(("create", collection))
        made = dict(body, id=f"ag-{next(_ids):03d}", addresses=set(body["addresses"]))
        self.address_groups[made["id"]] = made
        return self.get(collection, made["id"])

    def create_many(self, collection, rules):
        self.calls.append(("create", collection, len(rules)))
        for rule in rules:
            self.groups[rule["security_group_id"]]["security_group_rules"].append(dict(rule, id=f"rule-{next(_ids)}"))

    def delete(self, collection, obj_id):
        self.calls.append(("delete", collection))
        if collection == "security-group-rules":
            for group in self.groups.values():
                group["security_group_rules"] = [r for r in group["security_group_rules"] if r["id"] != obj_id]
            return True
        return self.address_groups.pop(obj_id, None) is not None

    def action(self, collection, obj_id, action, request):
        self.calls.append((action, tuple(request["addresses"])))
        group = self.address_groups.get(obj_id)
        if group is None:
            return None
        addresses = set(request["addresses"])
        if action == "add_addresses":
            if addresses & group["addresses"]:
                raise Rejected(400, "Addresses already exist")
            group["addresses"] |= addresses
        else:
            if addresses - group["addresses"]:
                return None  # AddressesNotFound: 404
            group["addresses"] -= addresses
        return self.get(collection, obj_id)


class _Regions:
    def __init__(self, central, regions):
        self.central = central
        self.regions = regions

    def neutron(self, region):
        return self.regions[region]


class _Topology:
    def __init__(self, regions, routed=None):
        self.names = list(regions)
        self.routed = routed or {}  # network id -> regions where a port of it was bound

    def regions(self):
        return self.names

    def routed_regions(self, network_id):
        return set(self.routed.get(network_id, ()))


class _Shadows:
    """ShadowPolicy's two answers: which networks get shadows, which regions bind them."""

    def __init__(self, networks=(), ovn_regions=()):
        self.networks, self.ovn_regions = set(networks), set(ovn_regions)

    def network_wants_shadows(self, network_id):
        return network_id in self.networks

    def binds_shadows(self, region):
        return region not in self.ovn_regions


def member_sync(central: FakeNeutron, regions: dict[str, FakeNeutron], routed=None,
                shadows: _Shadows | None = None) -> sg_members.SgMemberSync:
    """The handler over fakes (it reads only central, neutron(region), the
    regions' names and where shadows are), with hints of its own. By default no
    network has shadows: every remote member goes through address groups."""
    return sg_members.SgMemberSync(cast(Regions, _Regions(central, regions)),
                                   cast(Topology, _Topology(regions, routed)),
                                   cast(ShadowPolicy, shadows or _Shadows()), ag.KnownAddressGroups())


def as_client(fake: FakeNeutron) -> NeutronClient:
    """The reconcilers call only get/list/create/update/delete/action, which the fake answers."""
    return cast(NeutronClient, fake)


def test_converge_rereads_after_a_concurrent_change():
    neutron = FakeNeutron("R1")
    made = neutron.create("address-groups", ag.body(GROUP, ["10.0.0.1/32"]))
    neutron.address_groups[made["id"]]["addresses"].add("10.0.0.2/32")  # someone else added it meanwhile
    change = sg_members.converge(as_client(neutron), made, lambda have: {"10.0.0.2/32", "10.0.0.3/32"})
    assert neutron.address_groups[made["id"]]["addresses"] == {"10.0.0.2/32", "10.0.0.3/32"}
    assert (change.add, change.remove) == (["10.0.0.3/32"], ["10.0.0.1/32"])


def test_a_pair_is_added_where_the_member_is_remote_and_wires_its_own_region():
    central = FakeNeutron("Central", ports=[_vm("a", "10.0.0.5", "R1")])
    central.groups[S] = GROUP
    r1, r2 = FakeNeutron("R1", [GROUP]), FakeNeutron("R2", [GROUP])
    # R2 already has the address group (a member was bound in R1 before).
    r2_ag = r2.create("address-groups", ag.body(GROUP))
    handler = member_sync(central, {"R1": r1, "R2": r2})
    handler.sync_pair(S, "10.0.0.5")
    assert r2.address_groups[r2_ag["id"]]["addresses"] == {"10.0.0.5/32"}
    # R1, the member's own region: its address group made (empty: no member elsewhere), one companion rule.
    (r1_ag,) = r1.address_groups.values()
    assert r1_ag["addresses"] == set() and r1_ag["project_id"] == "p"
    companions = [r for r in r1.groups[S]["security_group_rules"] if r.get("remote_address_group_id")]
    assert [r["remote_address_group_id"] for r in companions] == [r1_ag["id"]]
    assert len(r1.groups[S]["security_group_rules"]) == 2  # the remote-group rule stays
    # Again: no change. R1, wired already, is not asked anything (its own rule admits
    # its member); R2's add to the address group it knows is refused (there already), then read.
    r1.calls.clear()
    r2.calls.clear()
    handler.sync_pair(S, "10.0.0.5")
    assert r1.calls == []
    assert r2.calls == [("add_addresses", ("10.0.0.5/32",)), ("list", "address-groups")]
    assert r2.address_groups[r2_ag["id"]]["addresses"] == {"10.0.0.5/32"}
    # The port is deleted at central: its address leaves.
    central.ports.clear()
    handler.sync_pair(S, "10.0.0.5/32")
    assert r2.address_groups[r2_ag["id"]]["addresses"] == set()


def test_a_member_shadowed_in_a_region_costs_that_region_no_request():
    """R2 holds a shadow of the member in its groups (the network reaches R2 with
    shadows): R2 counts it itself, so its address group is not asked. R3 runs
    ML2/OVN (no shadows) and R4 has no copy of the network: both get the address."""
    central = FakeNeutron("Central", ports=[_vm("a", "10.0.0.5", "R1", network="vx")])
    central.groups[S] = GROUP
    fakes = {r: FakeNeutron(r, [GROUP]) for r in ("R1", "R2", "R3", "R4")}
    made = {r: fakes[r].create("address-groups", ag.body(GROUP)) for r in ("R2", "R3", "R4")}
    handler = member_sync(central, fakes, routed={"vx": {"R1", "R2", "R3"}},
                          shadows=_Shadows(networks={"vx"}, ovn_regions={"R3"}))
    handler.sync_pair(S, "10.0.0.5")  # learns the address groups
    for fake in fakes.values():
        fake.calls.clear()
    central.ports.append(_vm("b", "10.0.0.6", "R1", network="vx"))
    handler.sync_pair(S, "10.0.0.6")
    assert fakes["R2"].calls == [] and fakes["R1"].calls == []
    assert fakes["R2"].address_groups[made["R2"]["id"]]["addresses"] == set()
    for region in ("R3", "R4"):
        assert fakes[region].address_groups[made[region]["id"]]["addresses"] == {"10.0.0.5/32", "10.0.0.6/32"}
    # Gone at central: the regions that hold it lose it; R2 still needs nothing.
    central.ports.clear()
    handler.sync_pair(S, "10.0.0.6")
    assert fakes["R3"].address_groups[made["R3"]["id"]]["addresses"] == {"10.0.0.5/32"}
    assert not [c for c in fakes["R2"].calls if c[0] in ("add_addresses", "remove_addresses")]


def test_a_full_pass_adds_no_shadowed_member_and_keeps_one_already_there():
    """security_group_sync's fill: a member the region shadows is not added to its
    address group, but an entry it has already stays while the member does (a
    shadow of an older release carries no groups until its network's next pass);
    a member the region does not shadow is added; a former member's entry goes."""
    members_now = [_vm("a", "10.0.0.5", "R1", network="vx"), _vm("b", "10.0.0.6", "R1", network="other"),
                   _vm("c", "10.0.0.7", "R1", network="vx")]
    central = FakeNeutron("Central", ports=members_now)
    r2 = FakeNeutron("R2", [GROUP])
    made = r2.create("address-groups", ag.body(GROUP, ["10.0.0.5/32", "10.0.0.9/32"]))
    reach = {("vx", "R2")}
    members = sg_members.Members(as_client(central), {S: GROUP},
                                 lambda port, region: (port["network_id"], region) in reach)
    sg_members.wire_group(as_client(r2), "R2", GROUP, r2.groups[S], members, fill=True)
    assert r2.address_groups[made["id"]]["addresses"] == {"10.0.0.5/32", "10.0.0.6/32"}


def test_a_member_moved_here_leaves_its_address_here_until_it_is_gone_from_the_group():
    """A member's own region is not read on its events: an address left in that
    region's address group from when the member was bound elsewhere admits only
    what the group's own rule admits there; the address leaves once no member holds it."""
    member = _vm("a", "10.0.0.5", "R2")
    central = FakeNeutron("Central", ports=[member])
    central.groups[S] = GROUP
    r1, r2 = FakeNeutron("R1", [GROUP]), FakeNeutron("R2", [GROUP])
    r1_ag = r1.create("address-groups", ag.body(GROUP))
    handler = member_sync(central, {"R1": r1, "R2": r2})
    handler.sync_pair(S, "10.0.0.5")
    assert r1.address_groups[r1_ag["id"]]["addresses"] == {"10.0.0.5/32"}
    central.ports[0] = _vm("a", "10.0.0.5", "R1")  # moved to R1
    r1.calls.clear()
    handler.sync_pair(S, "10.0.0.5")
    (r2_ag,) = r2.address_groups.values()
    assert r2.address_groups[r2_ag["id"]]["addresses"] == {"10.0.0.5/32"}
    assert r1.calls[0][0] == "list"  # wiring R1's copy for its first member there, not a removal
    assert not [c for c in r1.calls if c[0] == "remove_addresses"]
    assert r1.address_groups[r1_ag["id"]]["addresses"] == {"10.0.0.5/32"}
    central.ports.clear()  # deleted: no member holds the address, it leaves everywhere
    handler.sync_pair(S, "10.0.0.5")
    assert r1.address_groups[r1_ag["id"]]["addresses"] == set()
    assert r2.address_groups[r2_ag["id"]]["addresses"] == set()


def _batch(*keys):
    return Batch(jobtypes.SG_MEMBER_SYNC, tuple(
        JobContext(job_id=f"job-{k}", job_type=jobtypes.SG_MEMBER_SYNC, resource_id=k, project_id="p", payload={},
                   attempt=1) for k in keys))


def test_a_batch_of_a_groups_pairs_reads_central_once_and_changes_each_address_group_once():
    bound = [_vm(f"p{n}", f"10.0.0.{n}", "R1") for n in range(1, 31)]
    central = FakeNeutron("Central", ports=bound)
    central.groups[S] = GROUP
    r1, r2, r3 = FakeNeutron("R1", [GROUP]), FakeNeutron("R2", [GROUP]), FakeNeutron("R3", [GROUP])
    made = {r.region: r.create("address-groups", ag.body(GROUP)) for r in (r1, r2, r3)}  # members seen before
    for fake in (central, r1, r2, r3):
        fake.calls.clear()
    gone = "10.0.0.99/32"  # a member deleted meanwhile: its pair removes it
    r2.address_groups[made["R2"]["id"]]["addresses"].add(gone)
    batch = _batch(*(f"{S}#10.0.0.{n}/32" for n in range(1, 31)), f"{S}#{gone}")
    member_sync(central, {"R1": r1, "R2": r2, "R3": r3}).run(batch)
    want = {f"10.0.0.{n}/32" for n in range(1, 31)}
    assert r2.address_groups[made["R2"]["id"]]["addresses"] == want
    assert r3.address_groups[made["R3"]["id"]]["addresses"] == want
    assert central.calls == [("list", "ports")]
    assert [c[0] for c in r3.calls] == ["list", "add_addresses"]  # find, then one add for 30 addresses
    assert [c[0] for c in r2.calls] == ["list", "add_addresses", "remove_addresses"]
    assert all(batch.outcome(ctx) is None for ctx in batch)


def test_a_worker_that_knows_the_address_groups_adds_without_reading_and_rereads_a_stale_one():
    central = FakeNeutron("Central", ports=[_vm("a", "10.0.0.5", "R1")])
    central.groups[S] = GROUP
    r1, r2, r3 = FakeNeutron("R1", [GROUP]), FakeNeutron("R2", [GROUP]), FakeNeutron("R3", [GROUP])
    for fake in (r2, r3):
        fake.create("address-groups", ag.body(GROUP))
    handler = member_sync(central, {"R1": r1, "R2": r2, "R3": r3})
    handler.sync_pair(S, "10.0.0.5")  # learns the ids, wires R1's copy
    central.ports.append(_vm("b", "10.0.0.6", "R1"))
    for fake in (r1, r2, r3):
        fake.calls.clear()
    gets = []
    real_get = r1.get

    def get(collection, obj_id):
        if collection == "security-groups":
            gets.append(obj_id)
        return real_get(collection, obj_id)

    r1.get = get  # type: ignore[method-assign]
    # R3's address group is deleted and made again by someone else: the id known is stale.
    (stale,) = r3.address_groups
    del r3.address_groups[stale]
    fresh = r3.create("address-groups", ag.body(GROUP, ["10.0.0.5/32"]))
    r3.calls.clear()
    handler.sync_pair(S, "10.0.0.6")
    assert not gets and r1.calls == []  # no re-wiring, and its own member needs nothing there
    assert r2.calls == [("add_addresses", ("10.0.0.6/32",))]  # straight to the known group
    assert [c[0] for c in r3.calls] == ["add_addresses", "list", "add_addresses"]  # 404, read, converge
    assert r3.address_groups[fresh["id"]]["addresses"] == {"10.0.0.5/32", "10.0.0.6/32"}
    assert handler.known.id_of("R3", S) == fresh["id"]
    # A rule change at central: R1's copy is wired again on the next member event.
    central.groups[S] = dict(GROUP, security_group_rules=[REMOTE, dict(REMOTE, id="r2", ethertype="IPv6")])
    handler.sync_pair(S, "10.0.0.6")
    assert gets == [S]


def test_a_group_central_cannot_read_retries_its_pairs_and_the_other_group_goes_on():
    other = dict(GROUP, id="22222222-2222-2222-2222-222222222222")
    central = FakeNeutron("Central", ports=[_vm("a", "10.0.0.5", "R1")])
    central.groups[S] = GROUP
    r1, r2 = FakeNeutron("R1", [GROUP]), FakeNeutron("R2", [GROUP])
    r2_ag = r2.create("address-groups", ag.body(GROUP))
    batch = _batch(f"{other['id']}#10.0.0.7/32", f"{S}#10.0.0.5/32")
    real_get = central.get

    def get(collection, obj_id):
        if obj_id == other["id"]:
            raise Unavailable("central: timed out")
        return real_get(collection, obj_id)

    central.get = get  # type: ignore[method-assign]
    member_sync(central, {"R1": r1, "R2": r2}).run(batch)
    outcomes = {ctx.resource_id: batch.outcome(ctx) for ctx in batch}
    retried = outcomes[f"{other['id']}#10.0.0.7/32"]
    assert retried is not None and retried.name == "retry_later"
    assert outcomes[f"{S}#10.0.0.5/32"] is None
    assert r2.address_groups[r2_ag["id"]]["addresses"] == {"10.0.0.5/32"}


def test_racing_creators_keep_the_lowest_id():
    neutron = FakeNeutron("R1")
    first = neutron.create("address-groups", ag.body(GROUP))
    chosen = sg_members.create(as_client(neutron), GROUP, {"10.0.0.5/32"})
    assert chosen["id"] == first["id"] and list(neutron.address_groups) == [first["id"]]


def test_port_events_queue_pairs_not_the_project(monkeypatch):
    queued = []
    state = type("State", (), {"jobs": type("Jobs", (), {"enqueue": staticmethod(
        lambda job_type, key, project_id=None: queued.append((job_type, key)))})()})()
    monkeypatch.setattr(mech_driver, "state", lambda: state)
    mech_driver.CentralMechanismDriver._sync_members(None, _vm("a", "10.0.0.5", "R1"))
    assert queued == [(jobtypes.SG_MEMBER_SYNC, f"{S}#10.0.0.5/32")]
