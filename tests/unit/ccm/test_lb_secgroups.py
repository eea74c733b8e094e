"""manage-security-groups: a group per Service and region that opens
its NodePorts from the member subnet on its member nodes' ports, and goes with it."""

from __future__ import annotations

from dataclasses import replace

from isthmus.ccm.openstack.loadbalancer import model as m
from isthmus.ccm.openstack.loadbalancer.octavia import RegionReconciler
from isthmus.ccm.openstack.loadbalancer.options import LoadBalancerConfig
from isthmus.ccm.openstack.loadbalancer.plan import DesiredLB, plan_service
from isthmus.ccm.openstack.loadbalancer.secgroups import PortRecord, Rule, Subnet, wanted_rules

from .lbfakes import FakeOctavia

UID = "uid-1"
MANAGED = LoadBalancerConfig(default={"subnet_id": "sub-1", "manage_security_groups": True})
PORTS = (m.ServicePort("http", "TCP", 80, 30080), m.ServicePort("dns", "UDP", 53, 30053))


def desired(nodes=(("n1", "10.0.0.1", "vm-1"), ("n2", "10.0.0.2", "vm-2")), config=MANAGED,
            **service: object) -> DesiredLB:
    view = m.ServiceView("ns", "web", UID, "LoadBalancer", PORTS, **service)  # type: ignore[arg-type]
    lb_nodes = [m.LBNode(name, "RegionOne", addr, True, False, False, server_id=vm) for name, addr, vm in nodes]
    return plan_service(view, lb_nodes, config, ("RegionOne",), "c").load_balancers["RegionOne"]


def region() -> FakeOctavia:
    fake = FakeOctavia("RegionOne")
    fake.subnet_cidrs["sub-1"] = Subnet("10.0.0.0/24", 4)
    for n, vm in ((1, "vm-1"), (2, "vm-2"), (3, "vm-3")):
        fake.ports[f"port-{n}"] = PortRecord(f"port-{n}", vm, ("sub-1",), ("default",), revision=1)
    fake.ports["port-1-other-net"] = PortRecord("port-1-other-net", "vm-1", ("sub-9",), ("default",), revision=1)
    return fake


def reconciler(fake: FakeOctavia) -> RegionReconciler:
    return RegionReconciler(fake, timeout=5, interval=1, sleep=lambda _: None)


def ingress(fake: FakeOctavia) -> set[Rule]:
    (group,) = fake.groups.values()
    return {r.rule for r in group.rules if r.direction == "ingress" and r.rule is not None}


def groups_of(fake: FakeOctavia) -> dict[str, tuple[str, ...]]:
    return {pid: p.security_groups for pid, p in sorted(fake.ports.items())}


def test_the_group_opens_each_node_port_from_the_member_subnet_on_member_ports_only() -> None:
    fake = region()
    result = reconciler(fake).ensure(desired(), UID, "ns/web")
    (group,) = fake.groups.values()
    assert group.name == "lb-sg-kube_service_c_ns_web" and group.description.startswith(f"isthmus-ccm uid={UID} ")
    assert ingress(fake) == {Rule("IPv4", "tcp", 30080, "10.0.0.0/24"), Rule("IPv4", "udp", 30053, "10.0.0.0/24")}
    assert groups_of(fake) == {"port-1": ("default", group.id), "port-1-other-net": ("default",),
                               "port-2": ("default", group.id), "port-3": ("default",)}
    assert not result.problems
    writes = len(fake.writes)
    assert reconciler(fake).ensure(desired(), UID, "ns/web").changes == []  # converged: nothing written
    assert len(fake.writes) == writes


def test_members_and_ports_follow_changes_and_a_stray_rule_goes() -> None:
    fake = region()
    reconciler(fake).ensure(desired(), UID, "ns/web")
    (group,) = fake.groups.values()
    fake.create_security_group_rule(group.id, Rule("IPv4", "tcp", 22, "0.0.0.0/0"))  # added by hand: not ours to keep
    moved = desired(nodes=(("n2", "10.0.0.2", "vm-2"), ("n3", "10.0.0.3", "vm-3")))
    assert moved.security_group is not None
    one_port = replace(moved, security_group=replace(moved.security_group, node_ports=(("tcp", 30081),)))
    reconciler(fake).ensure(one_port, UID, "ns/web")
    assert ingress(fake) == {Rule("IPv4", "tcp", 30081, "10.0.0.0/24")}
    assert groups_of(fake)["port-1"] == ("default",)  # n1 is no member any more
    assert group.id in groups_of(fake)["port-3"]


def test_local_traffic_policy_opens_the_health_check_port_and_ovn_admits_the_clients() -> None:
    local = desired(local_health_port=32000).security_group
    assert local is not None and ("tcp", 32000) in local.node_ports
    ovn = LoadBalancerConfig(default={**MANAGED.default, "lb_provider": "ovn"})
    ranged = desired(config=ovn, source_ranges=("192.0.2.0/24", "2001:db8::/32")).security_group
    assert ranged is not None
    v4 = Subnet("10.0.0.0/24", 4)
    assert {r.remote_ip_prefix for r in wanted_rules(ranged, v4)} == {"192.0.2.0/24"}
    anyone = desired(config=ovn).security_group
    assert anyone is not None
    assert {r.remote_ip_prefix for r in wanted_rules(anyone, v4)} == {"0.0.0.0/0"}
    assert {r.ethertype for r in wanted_rules(anyone, Subnet("fd00::/64", 6))} == {"IPv6"}


def test_deleting_the_service_takes_the_group_off_every_port_and_deletes_it() -> None:
    fake = region()
    reconciler(fake).ensure(desired(), UID, "ns/web")
    reconciler(fake).delete("kube_service_c_ns_web", UID, keep_floatingip=False, service_key="ns/web")
    assert fake.groups == {} and all(p.security_groups == ("default",) for p in fake.ports.values())


def test_turned_off_the_group_goes_and_someone_elses_group_of_that_name_stays() -> None:
    fake = region()
    reconciler(fake).ensure(desired(), UID, "ns/web")
    theirs = fake.create_security_group("lb-sg-kube_service_c_ns_web", "made by hand")
    reconciler(fake).ensure(desired(config=LoadBalancerConfig(default={"subnet_id": "sub-1"})), UID, "ns/web")
    assert list(fake.groups) == [theirs.id]
    assert all(p.security_groups == ("default",) for p in fake.ports.values())


def test_a_node_without_a_port_on_the_member_subnet_is_named() -> None:
    fake = region()
    result = reconciler(fake).ensure(desired(nodes=(("n9", "10.0.0.9", "vm-9"),)), UID, "ns/web")
    assert any("vm-9 has no port on member subnet sub-1" in p for p in result.problems)


def test_a_group_that_cannot_be_planned_is_left_as_it_is_never_removed() -> None:
    """The option on, but the VIP given by network only and no member subnet: a
    Warning, and the group made before stays on its ports (a gap in the
    configuration is no proof that the group should go)."""
    fake = region()
    reconciler(fake).ensure(desired(), UID, "ns/web")
    before = (dict(fake.groups), groups_of(fake))
    by_network = LoadBalancerConfig(default={"network_id": "net-1", "manage_security_groups": True})
    view = m.ServiceView("ns", "web", UID, "LoadBalancer", PORTS)
    plan = plan_service(view, [m.LBNode("n1", "RegionOne", "10.0.0.1", True, False, False, server_id="vm-1")],
                        by_network, ("RegionOne",), "c")
    assert any("manage-security-groups needs a member subnet" in p for p in plan.problems)
    reconciler(fake).ensure(plan.load_balancers["RegionOne"], UID, "ns/web")
    assert (dict(fake.groups), groups_of(fake)) == before
