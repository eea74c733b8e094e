"""Pure port planning of the network_sync reconciler."""

from isthmus.network import PROFILE_KEY
from isthmus.network.reconcilers import plans


def _port(port_id, owner="", host="", region=None):
    profile = {PROFILE_KEY: {"region": region}} if region else {}
    return {"id": port_id, "network_id": "n", "project_id": "p", "mac_address": "fa:16:3e:00:00:01",
            "fixed_ips": [{"subnet_id": "s", "ip_address": "10.0.0.5"}], "device_owner": owner,
            "device_id": "", "binding:host_id": host, "binding:profile": profile}


def test_an_unbound_copy_of_a_port_deleted_at_central_is_deleted():
    # Nova leaves a pre-created port unbound (device_owner "") when its server goes;
    # once central deletes the port, the copy must go (it holds security groups).
    regional = [_port("a"), _port("b", owner="compute:az1", host="h")]
    assert plans.missing_at_central([], regional) == {"a", "b"}
    plan = plans.plan_ports("RegionOne", [], regional, deleted={"a", "b"})
    assert sorted(plan.delete) == ["a", "b"]


def test_a_port_missing_at_central_without_a_tombstone_is_kept():
    """Outages are not deletions: a truncated or failed central read, or a 404
    central never recorded as its own delete, removes nothing."""
    local_vm = _port("b", owner="compute:az1", host="h", region="RegionOne")
    shadow = plans.shadow_body(_remote_vm())
    shadow["id"] = "r"
    regional = [_port("a"), local_vm, shadow, _port("d", owner="network:dhcp")]
    assert plans.missing_at_central([], regional) == {"a", "b", "r"}
    assert plans.plan_ports("RegionOne", [], regional).delete == []
    assert sorted(plans.plan_ports("RegionOne", [], regional, deleted={"r"}).delete) == ["r"]


def test_network_owned_ports_and_live_copies_stay():
    central = [_port("a")]
    regional = [_port("a"), _port("d", owner="network:dhcp"), _port("g", owner="network:distributed")]
    assert plans.plan_ports("RegionOne", central, regional).delete == []


def test_an_unbound_copy_of_a_port_bound_elsewhere_is_deleted():
    central = [_port("a", owner="compute:az2", host="regiontwo-compute", region="RegionTwo")]
    assert plans.plan_ports("RegionOne", central, [_port("a")]).delete == ["a"]


def _remote_vm(agent=None):
    port = _port("r", owner="compute:az2", host="regiontwo-compute", region="RegionTwo")
    if agent:
        port["binding:profile"][PROFILE_KEY]["agent"] = agent
    return port


AGENT = {"type": "Open vSwitch agent", "host": "regiontwo-compute", "tunnel_ip": "192.0.2.2"}


def test_a_remote_vm_gets_a_shadow_carrying_its_agent():
    local_vm = _port("l", owner="compute:az1", host="regionone-compute", region="RegionOne")
    plan = plans.plan_ports("RegionOne", [local_vm, _remote_vm(AGENT)], [local_vm])
    (shadow,) = plan.create_shadows
    assert shadow["name"] == "shadow_port_r" and shadow["binding:host_id"] == "regiontwo-compute"
    assert shadow["binding:profile"] == {PROFILE_KEY: {"region": "RegionTwo", "agent": AGENT}}
    assert "binding:profile" not in plans.shadow_body(_remote_vm())  # no agent reported: none sent


def test_ports_left_to_their_own_run_are_not_planned_but_still_make_the_region_want_shadows():
    """network_sync leaves a port whose port_sync is still to run to that run. The
    first server's port of a network in a region is such a port when the network's
    sync runs (both queued by its bind): the region still wants every other shadow."""
    local_vm = _port("l", owner="compute:az1", host="regionone-compute", region="RegionOne")
    other = {**_remote_vm(), "id": "o", "mac_address": "fa:16:3e:00:00:02"}
    stale_shadow = {**plans.shadow_body(other), "id": "o", "binding:host_id": "elsewhere"}
    plan = plans.plan_ports("RegionOne", [local_vm, _remote_vm(), other], [local_vm, stale_shadow],
                            left={"l", "o"})
    assert [body["name"] for body in plan.create_shadows] == ["shadow_port_r"]
    assert plan.delete == []  # o's stale shadow is o's own run's to remake
    plan = plans.plan_ports("RegionOne", [local_vm, _remote_vm()], [local_vm], left={"r"})
    assert plan.create_shadows == [] and plan.delete == []


def test_a_shadow_carries_its_ports_groups_and_follows_them_in_place():
    """The region counts a shadow as a member of its port's groups; a group
    change is an update of the shadow, never a remake (that would cut its L2)."""
    port = {**_remote_vm(), "security_groups": ["sg-b", "sg-a"], "port_security_enabled": True}
    shadow = {**plans.shadow_body(port), "id": "r"}
    assert (shadow["security_groups"], shadow["port_security_enabled"]) == (["sg-a", "sg-b"], True)
    assert plans.shadow_security_changes(shadow, port) == {}
    moved = {**port, "security_groups": ["sg-a"]}
    assert plans.shadow_security_changes(shadow, moved) == {"port_security_enabled": True,
                                                            "security_groups": ["sg-a"]}
    assert not plans.shadow_is_stale(shadow, moved)
    # Port security off at central: no groups to carry, and none allowed by Neutron.
    bare = {**port, "port_security_enabled": False}
    assert plans.shadow_security(bare) == {"port_security_enabled": False, "security_groups": []}
    assert plans.shadow_security_changes(shadow, bare) == {"port_security_enabled": False, "security_groups": []}
    # A shadow made before shadows carried groups gets them.
    old = {**shadow, "port_security_enabled": False, "security_groups": []}
    assert plans.shadow_security_changes(old, port)["security_groups"] == ["sg-a", "sg-b"]


def test_without_shadows_none_are_made_and_existing_ones_go():
    local_vm = _port("l", owner="compute:az1", host="regionone-compute", region="RegionOne")
    shadow = plans.shadow_body(_remote_vm())
    shadow["id"] = "r"
    plan = plans.plan_ports("RegionOne", [local_vm, _remote_vm()], [local_vm, shadow], shadows=False)
    assert plan.create_shadows == [] and plan.delete == ["r"]
    assert plans.plan_ports("RegionOne", [local_vm, _remote_vm()], [local_vm, shadow]).delete == []


def test_a_shadow_is_remade_when_the_remote_tunnel_moves():
    local_vm = _port("l", owner="compute:az1", host="regionone-compute", region="RegionOne")
    shadow = plans.shadow_body(_remote_vm(AGENT))
    shadow["id"] = "r"
    moved = _remote_vm({**AGENT, "tunnel_ip": "192.0.2.9"})
    plan = plans.plan_ports("RegionOne", [local_vm, moved], [local_vm, shadow])
    assert plan.delete == ["r"] and [s["binding:profile"][PROFILE_KEY]["agent"]["tunnel_ip"]
                                     for s in plan.create_shadows] == ["192.0.2.9"]


def test_a_bound_router_interface_makes_a_region_want_the_networks_remote_ports():
    """A router half's transit port (a router interface in its region) must see the
    other halves' transit ports: the periodic pass shadows them like a server's peers."""
    from isthmus.network.reconcilers.plans import plan_ports

    remote = {"id": "p-two", "network_id": "n", "mac_address": "fa:16:3e:00:00:02",
              "device_owner": "compute:isthmus-transit",
              "device_id": "half-two", "fixed_ips": [{"subnet_id": "s", "ip_address": "100.64.0.2"}],
              "binding:host_id": "regiontwo-compute", "project_id": "p",
              "binding:profile": {"isthmus": {"region": "RegionTwo", "agent": {
                  "type": "Open vSwitch agent", "host": "regiontwo-compute", "tunnel_ip": "192.0.2.2"}}}}
    here = {"id": "p-one", "network_id": "n", "mac_address": "fa:16:3e:00:00:01",
            "device_owner": "network:router_interface", "device_id": "half-one",
            "fixed_ips": [{"subnet_id": "s", "ip_address": "100.64.0.1"}], "binding:host_id": "regionone-compute"}
    (shadow,) = plan_ports("RegionOne", [remote], [here]).create_shadows
    assert shadow["mac_address"] == remote["mac_address"]
    assert plan_ports("RegionOne", [remote], [{**here, "binding:host_id": ""}]).create_shadows == []


def test_changed_within_reads_neutrons_updated_at():
    from datetime import UTC, datetime, timedelta

    now = datetime(2026, 12, 7, 17, 30, 0, tzinfo=UTC)
    window = timedelta(seconds=10)
    assert plans.changed_within({"updated_at": "2026-12-07T17:29:55Z"}, window, now)
    assert not plans.changed_within({"updated_at": "2026-12-07T17:29:49Z"}, window, now)
    assert plans.changed_within({"updated_at": "2026-12-07T17:29:55"}, window, now)  # no zone: UTC, as Neutron's
    assert not plans.changed_within({}, window, now) and not plans.changed_within({"updated_at": None}, window, now)
