"""Pure logic of server groups over regions (hint parsing, copies, members)."""

from __future__ import annotations

import pytest

from isthmus.gateway.faults import Fault
from isthmus.gateway.server_groups import (
    GroupHint,
    GroupSpec,
    affinity_conflict,
    copy_body,
    group_hint,
    group_spec,
    merge_members,
)

G = "5b2c0f9e-7d4a-4a57-9d0f-0c3c1f6f2a11"


def test_group_hint_found_under_either_key():
    assert group_hint({"server": {}, "os:scheduler_hints": {"group": G}}) == GroupHint("os:scheduler_hints", G)
    assert group_hint({"OS-SCH-HNT:scheduler_hints": {"group": G}}) == GroupHint("OS-SCH-HNT:scheduler_hints", G)


def test_no_group_hint():
    assert group_hint({"server": {}}) is None
    assert group_hint({"os:scheduler_hints": {"same_host": [G]}}) is None


@pytest.mark.parametrize("hints, field", [
    ("group", "os:scheduler_hints"),
    ([G], "os:scheduler_hints"),
    ({"group": 7}, "os:scheduler_hints.group"),
    ({"group": [G]}, "os:scheduler_hints.group"),
    ({"group": "../servers"}, "os:scheduler_hints.group"),
])
def test_malformed_hint_is_a_400_naming_the_field(hints, field):
    with pytest.raises(Fault) as err:
        group_hint({"os:scheduler_hints": hints})
    assert err.value.status == 400 and f"field/attribute {field}:" in err.value.message


def test_group_spec_reads_both_formats():
    new = group_spec({"server_group": {"name": "g", "policy": "anti-affinity", "rules": {"max_server_per_host": 2},
                                       "project_id": "p", "members": ["a"]}})
    assert new == GroupSpec("g", "anti-affinity", {"max_server_per_host": 2}, "p", ("a",))
    old = group_spec({"server_group": {"name": "g", "policies": ["affinity"], "members": []}})
    assert old == GroupSpec("g", "affinity", {}, None, ())


def test_copy_body_keeps_policy_and_rules():
    spec = GroupSpec("g", "anti-affinity", {"max_server_per_host": 2}, "p", ())
    assert copy_body(spec, True) == {"server_group": {"name": "g", "policy": "anti-affinity",
                                                      "rules": {"max_server_per_host": 2}}}
    assert copy_body(spec, False) == {"server_group": {"name": "g", "policies": ["anti-affinity"]}}
    assert "rules" not in copy_body(GroupSpec("g", "affinity", {}, None, ()), True)["server_group"]


def test_merge_members_adds_each_once():
    group = {"members": ["a"]}
    merge_members(group, ["b", "a", "c"])
    assert group["members"] == ["a", "b", "c"]
    empty: dict = {}
    merge_members(empty, ["x"])
    assert empty["members"] == ["x"]


def test_affinity_conflict_only_for_hard_affinity_elsewhere():
    members = {"RegionOne": ("a",), "RegionTwo": ()}
    assert affinity_conflict("affinity", "RegionTwo", members) == "RegionOne"
    assert affinity_conflict("affinity", "RegionOne", members) is None
    assert affinity_conflict("anti-affinity", "RegionTwo", members) is None
    assert affinity_conflict("soft-affinity", "RegionTwo", members) is None
    assert affinity_conflict("affinity", "RegionTwo", {"RegionOne": (), "RegionTwo": ()}) is None
