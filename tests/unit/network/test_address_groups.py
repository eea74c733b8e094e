"""Remote-group members as regional address groups: pure planning."""

from isthmus.network import PROFILE_KEY, SHADOW_OWNER, members
from isthmus.network.copies import rule_key
from isthmus.network.reconcilers import address_groups as ag
from isthmus.network.reconcilers import plans

S = "11111111-1111-1111-1111-111111111111"


def _vm(port_id, ips, region, groups=(S,), owner="compute:az1"):
    return {"id": port_id, "project_id": "p", "device_owner": owner, "security_groups": list(groups),
            "fixed_ips": [{"subnet_id": "s", "ip_address": ip} for ip in ips],
            "binding:host_id": f"{region}-host" if region else "",
            "binding:profile": {PROFILE_KEY: {"region": region}} if region else {}}


def _group(rules):
    return {"id": S, "project_id": "p", "security_group_rules": rules}


REMOTE = {"id": "r1", "direction": "ingress", "ethertype": "IPv4", "protocol": "tcp", "port_range_min": 80,
          "port_range_max": 80, "remote_ip_prefix": None, "remote_group_id": S, "description": ""}
SSH = {"id": "r2", "direction": "ingress", "ethertype": "IPv4", "protocol": "tcp", "port_range_min": 22,
       "port_range_max": 22, "remote_ip_prefix": None, "remote_group_id": None, "description": ""}


def test_each_region_holds_the_members_bound_elsewhere():
    ports = [_vm("a", ["10.0.0.5"], "RegionOne"), _vm("b", ["10.0.0.6", "fd00::6"], "RegionTwo"),
             _vm("c", ["10.0.0.7"], None),  # unbound: no member anywhere
             _vm("d", ["10.0.0.8"], "RegionTwo", groups=("other",)),  # another group
             _vm("e", ["10.0.0.9"], "RegionTwo", owner=SHADOW_OWNER),  # a shadow is no member
             _vm("f", ["10.0.0.10"], "RegionTwo", owner="network:dhcp")]
    assert ag.desired_addresses(S, "RegionOne", ports) == {"10.0.0.6/32", "fd00::6/128"}
    assert ag.desired_addresses(S, "RegionTwo", ports) == {"10.0.0.5/32"}
    assert ag.desired_addresses(S, "RegionThree", ports) == {"10.0.0.5/32", "10.0.0.6/32", "fd00::6/128"}


def test_contents_converge_with_one_add_and_one_remove():
    change = ag.diff({"10.0.0.5/32", "10.0.0.6/32", "fd00:0:0::6/128"}, ["10.0.0.6/32", "10.0.0.9/32", "fd00::6/128"])
    assert (change.add, change.remove) == (["10.0.0.5/32"], ["10.0.0.9/32"])
    assert not ag.diff(["10.0.0.5"], ["10.0.0.5/32"])


def test_one_companion_per_remote_group_rule_and_the_original_stays():
    desired = plans.desired_rules(_group([REMOTE, SSH]), {S: "ag-1"})
    assert len(desired) == 3
    (companion,) = [r for r in desired if r.get("remote_address_group_id")]
    assert companion["remote_address_group_id"] == "ag-1" and companion["remote_group_id"] is None
    assert {k: companion[k] for k in ("direction", "ethertype", "protocol", "port_range_min", "port_range_max")} == \
        {k: REMOTE[k] for k in ("direction", "ethertype", "protocol", "port_range_min", "port_range_max")}
    assert REMOTE in desired and SSH in desired
    # No address group (yet) in the region: no companion.
    assert plans.desired_rules(_group([REMOTE, SSH]), {}) == [REMOTE, SSH]


def test_companion_rules_are_kept_and_made_once():
    desired = plans.desired_rules(_group([REMOTE]), {S: "ag-1"})
    existing = [dict(REMOTE, id="x1"), dict(ag.companion_rule(REMOTE, "ag-1"), id="x2")]
    plan = plans.plan_rules(S, desired, existing)
    assert (plan.delete, plan.create) == ([], [])
    plan = plans.plan_rules(S, desired, [dict(REMOTE, id="x1")])
    assert plan.delete == [] and [r["remote_address_group_id"] for r in plan.create] == ["ag-1"]
    assert plan.create[0]["security_group_id"] == S and "remote_group_id" not in plan.create[0]


def test_a_twin_of_a_wanted_rule_is_kept():
    """Two wirings that raced made a companion twice. Deleting one twin on ML2/OVN
    deleted the ACL both stood for (Neutron removes ACLs by match): the ping that
    the remaining rule admits stopped."""
    desired = plans.desired_rules(_group([REMOTE]), {S: "ag-1"})
    companion = ag.companion_rule(REMOTE, "ag-1")
    existing = [dict(REMOTE, id="x1"), dict(companion, id="x2"), dict(companion, id="x3"), dict(SSH, id="x4")]
    plan = plans.plan_rules(S, desired, existing)
    assert (plan.delete, plan.create) == (["x4"], [])


def test_rule_key_tells_companions_apart_by_address_group():
    one, two = ag.companion_rule(REMOTE, "ag-1"), ag.companion_rule(REMOTE, "ag-2")
    assert rule_key(one) != rule_key(two) != rule_key(REMOTE)
    assert rule_key(one) == rule_key(dict(one, description="edited", id="z"))


def test_legacy_member_rules_are_removed():
    legacy = {"id": "old", "direction": "ingress", "ethertype": "IPv4", "protocol": "tcp", "port_range_min": 80,
              "port_range_max": 80, "remote_ip_prefix": "10.0.0.6/32", "remote_group_id": None,
              "description": f"{plans.MEMBER_RULE_TAG}{S}"}
    assert ag.is_legacy_member_rule(legacy)
    plan = plans.plan_rules(S, plans.desired_rules(_group([REMOTE]), {S: "ag-1"}), [dict(REMOTE, id="x1"), legacy])
    assert plan.delete == ["old"] and len(plan.create) == 1


def test_central_rules_naming_central_address_groups_are_not_copied():
    rule = dict(SSH, remote_address_group_id="central-ag")
    assert plans.desired_rules(_group([rule, REMOTE]), {}) == [REMOTE]


def test_only_the_group_owners_address_group_counts_lowest_id_first():
    group = _group([])
    found = [{"id": "b", "name": ag.name_of(S), "project_id": "p"},
             {"id": "a", "name": ag.name_of(S), "project_id": "p"},
             {"id": "0", "name": ag.name_of(S), "project_id": "intruder"},
             {"id": "1", "name": "something-else", "project_id": "p"}]
    chosen, duplicates = ag.choose(found, group)
    assert chosen is not None and chosen["id"] == "a" and [d["id"] for d in duplicates] == ["b"]
    assert ag.choose([found[2]], group) == (None, [])
    assert ag.group_of(ag.name_of(S)) == S and ag.group_of("default") is None
    body = ag.body(group, {"10.0.0.6/32"})
    assert (body["name"], body["project_id"], body["addresses"]) == (ag.name_of(S), "p", ["10.0.0.6/32"])


def test_port_events_name_the_pairs_they_change():
    bound = _vm("a", ["10.0.0.5"], "RegionOne")
    assert members.member_pairs(bound, _vm("a", ["10.0.0.5"], None)) == {(S, "10.0.0.5/32")}  # bound
    assert members.member_pairs(None, bound) == {(S, "10.0.0.5/32")}  # deleted
    assert members.member_pairs(_vm("a", ["10.0.0.5"], "RegionTwo"), bound) == {(S, "10.0.0.5/32")}  # moved
    assert members.member_pairs(_vm("a", ["10.0.0.9"], "RegionOne"), bound) == {(S, "10.0.0.5/32"), (S, "10.0.0.9/32")}
    assert members.member_pairs(_vm("a", ["10.0.0.5"], "RegionOne", groups=("g2",)), bound) == \
        {(S, "10.0.0.5/32"), ("g2", "10.0.0.5/32")}
    assert members.member_pairs(dict(bound, name="renamed"), bound) == set()  # nothing membership-related
    assert members.member_pairs(_vm("a", ["10.0.0.5"], None), _vm("a", ["10.0.0.6"], None)) == set()  # never a member
    assert members.member_key(S, "fd00::6") == f"{S}#fd00::6/128"
