"""LoadBalancer planning: options, annotations, node selection, placement per region (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from isthmus.ccm.config import ConfigError, parse_config
from isthmus.ccm.openstack.loadbalancer import model as m
from isthmus.ccm.openstack.loadbalancer.options import LBOptions, LoadBalancerConfig
from isthmus.ccm.openstack.loadbalancer.plan import (
    Member,
    Monitor,
    is_ours,
    lb_description,
    lb_name,
    member_nodes,
    plan_service,
)

REGIONS = ("RegionOne", "RegionTwo")
BASE = "[Global]\nauth-url = http://k/v3\nregion = RegionOne\nregions = RegionTwo\n"


def svc(annotations: dict[str, str] | None = None, ports: tuple[m.ServicePort, ...] | None = None,
        **kw: Any) -> m.ServiceView:
    return m.ServiceView("default", "web", "uid-1", "LoadBalancer",
                         ports if ports is not None else (m.ServicePort("http", "TCP", 80, 30080),),
                         annotations or {}, **kw)


def node(name: str, region: str, address: str, ready: bool = True, unschedulable: bool = False,
         excluded: bool = False) -> m.LBNode:
    return m.LBNode(name, region, address, ready, unschedulable, excluded)


CONFIG = LoadBalancerConfig(default={"subnet_id": "sub-default"}, regions={"RegionTwo": {"subnet_id": "sub-two"}})


# --- options ---

def test_load_balancer_section_and_per_region_subsections() -> None:
    config = parse_config(BASE + """
[LoadBalancer]
subnet-id = s1
floating-network-id = ext
lb-method = least_connections
create-monitor = yes
monitor-delay = 1m
monitor-timeout = 30s
monitor-max-retries = 2
lb-provider = amphora
manage-security-groups = true
cascade-delete = false
use-octavia = true
[LoadBalancer "RegionTwo"]
subnet-id = s2
floating-network-id = ext2
""")
    one = config.load_balancer.options_for("RegionOne")
    two = config.load_balancer.options_for("RegionTwo")
    assert one == LBOptions(subnet_id="s1", floating_network_id="ext", lb_method="LEAST_CONNECTIONS",
                            create_monitor=True, monitor_delay=60, monitor_timeout=30, monitor_max_retries=2,
                            lb_provider="amphora", manage_security_groups=True)
    assert (two.subnet_id, two.floating_network_id, two.monitor_delay) == ("s2", "ext2", 60)
    # an OCCM key with no effect here is named, not silently taken; use-octavia is always true here
    assert any("cascade-delete is not supported" in w for w in config.warnings)
    assert not any("use-octavia" in w for w in config.warnings)
    # no section [LoadBalancer] warning any more, and defaults without it
    assert parse_config(BASE).load_balancer.options_for("RegionOne") == LBOptions()


@pytest.mark.parametrize("line", ["lb-method = RANDOM", "monitor-delay = 1.5s", "create-monitor = maybe",
                                  "monitor-max-retries = x"])
def test_bad_load_balancer_values_are_fatal(line: str) -> None:
    with pytest.raises(ConfigError, match=r"\[LoadBalancer\]"):
        parse_config(BASE + "[LoadBalancer]\n" + line + "\n")


# --- records ---

@pytest.mark.parametrize(("provider_id", "labels", "region"), [
    ("openstack://RegionTwo/i-1", {m.LABEL_REGION: "RegionOne"}, "RegionTwo"),  # providerID wins
    ("openstack:///i-1", {m.LABEL_REGION: "RegionOne"}, "RegionOne"),
    ("", {m.LABEL_REGION: "RegionTwo"}, "RegionTwo"),
    ("aws:///i-1", {}, ""),
    ("", {}, ""),
])
def test_node_region(provider_id: str, labels: dict[str, str], region: str) -> None:
    assert m.node_region(provider_id, labels) == region


def test_member_nodes_follow_kubernetes_rules() -> None:
    nodes = [node("b", "RegionOne", "10.0.0.2"), node("a", "RegionOne", "10.0.0.1"),
             node("notready", "RegionOne", "10.0.0.3", ready=False),
             node("cordoned", "RegionOne", "10.0.0.4", unschedulable=True),
             node("excluded", "RegionOne", "10.0.0.5", excluded=True),
             node("noaddr", "RegionOne", "")]
    assert [n.name for n in member_nodes(nodes)] == ["a", "b"]


def test_unknown_annotations() -> None:
    ann = {m.ANN_SUBNET_ID: "x", m.ANN_SUBNET_ID + ".RegionTwo": "y", m.PREFIX + "x-forwarded-for": "true",
           m.PREFIX + "port-id": "p", m.PREFIX + "lb-method.RegionTwo": "x", "other.io/thing": "1", m.ANN_REGION: "R"}
    assert m.unknown_annotations(ann) == [m.PREFIX + "lb-method.RegionTwo", m.PREFIX + "port-id",
                                          m.PREFIX + "x-forwarded-for"]


def test_regional_annotation_wins_in_its_region() -> None:
    ann = {m.ANN_SUBNET_ID: "plain", m.ANN_SUBNET_ID + ".RegionTwo": "two"}
    assert m.annotation(ann, m.ANN_SUBNET_ID, "RegionOne") == "plain"
    assert m.annotation(ann, m.ANN_SUBNET_ID, "RegionTwo") == "two"
    # only region-scoped IDs take a suffix
    assert m.annotation({m.ANN_LB_METHOD + ".RegionTwo": "SOURCE_IP"}, m.ANN_LB_METHOD, "RegionTwo") == ""


def test_names_and_ownership() -> None:
    assert lb_name("prod", "ns", "web") == "kube_service_prod_ns_web"
    assert len(lb_name("c", "n" * 200, "s" * 200)) == 255
    desc = lb_description(svc(), "prod")
    assert is_ours(desc, "uid-1")
    assert not is_ours(desc, "uid-10") and not is_ours(desc, "") and not is_ours(None, "uid-1")
    assert not is_ours("Kubernetes external service default/web from cluster prod", "uid-1")  # OCCM's own


# --- placement ---

def test_one_load_balancer_per_region_with_nodes() -> None:
    nodes = [node("n1", "RegionOne", "10.0.0.1"), node("n2", "RegionTwo", "10.1.0.1"),
             node("n3", "RegionTwo", "10.1.0.2")]
    plan = plan_service(svc(), nodes, CONFIG, REGIONS, "prod")
    assert sorted(plan.load_balancers) == ["RegionOne", "RegionTwo"]
    one, two = plan.load_balancers["RegionOne"], plan.load_balancers["RegionTwo"]
    assert one.name == two.name == "kube_service_prod_default_web"
    assert (one.vip_subnet_id, two.vip_subnet_id) == ("sub-default", "sub-two")
    assert one.member_subnet_id == "sub-default"
    assert one.listeners[0].members == (Member("n1", "10.0.0.1", 30080),)
    assert two.listeners[0].members == (Member("n2", "10.1.0.1", 30080), Member("n3", "10.1.0.2", 30080))
    listener = one.listeners[0]
    assert (listener.name, listener.pool_name, listener.protocol, listener.pool_protocol, listener.lb_method) == (
        "listener_0_kube_service_prod_default_web", "pool_0_kube_service_prod_default_web", "TCP", "TCP",
        "ROUND_ROBIN")
    assert listener.monitor is None  # create-monitor defaults to false, as in OCCM
    assert not plan.problems


def test_region_annotation_restricts_placement() -> None:
    nodes = [node("n1", "RegionOne", "10.0.0.1"), node("n2", "RegionTwo", "10.1.0.1")]
    plan = plan_service(svc({m.ANN_REGION: "RegionTwo"}), nodes, CONFIG, REGIONS)
    assert list(plan.load_balancers) == ["RegionTwo"]
    assert plan.load_balancers["RegionTwo"].listeners[0].members == (Member("n2", "10.1.0.1", 30080),)
    bad = plan_service(svc({m.ANN_REGION: "RegionNine"}), nodes, CONFIG, REGIONS)
    assert bad.no_nodes and not bad.load_balancers and "not a configured region" in bad.problems[0]


@pytest.mark.parametrize(("nodes", "regions", "problem"), [
    ([], ["RegionOne"], None),
    ([node("n1", "RegionThree", "10.0.0.1"), node("n2", "RegionOne", "10.0.0.2")], ["RegionOne"],
     "RegionThree, which this CCM does not serve"),
    ([node("n1", "", "10.0.0.1"), node("n2", "RegionOne", "10.0.0.2")], ["RegionOne"], "nodes with no region"),
])
def test_nodes_outside_served_regions_are_reported(nodes: list[m.LBNode], regions: list[str],
                                                   problem: str | None) -> None:
    plan = plan_service(svc(), nodes, CONFIG, REGIONS)
    if not nodes:
        assert plan.no_nodes and not plan.load_balancers
        return
    assert sorted(plan.load_balancers) == regions
    assert problem is not None and any(problem in p for p in plan.problems), plan.problems


def test_region_without_subnet_is_a_problem_not_a_guess() -> None:
    plan = plan_service(svc(), [node("n1", "RegionOne", "10.0.0.1")], LoadBalancerConfig(), REGIONS)
    assert not plan.load_balancers and plan.skipped == {"RegionOne"}  # skipped, not a reason to delete
    assert "region RegionOne: no subnet-id or network-id" in plan.problems[0]
    by_network = plan_service(svc({m.ANN_NETWORK_ID: "net-1"}), [node("n1", "RegionOne", "10.0.0.1")],
                              LoadBalancerConfig(), REGIONS)
    lb = by_network.load_balancers["RegionOne"]
    assert (lb.vip_network_id, lb.vip_subnet_id, lb.member_subnet_id) == ("net-1", "", "")


def test_annotations_shape_listeners_pools_monitors() -> None:
    ann = {m.ANN_LB_METHOD: "source_ip", m.ANN_PROXY_PROTOCOL: "true", m.ANN_ENABLE_MONITOR: "true",
           m.ANN_MONITOR_DELAY: "7", m.ANN_CONNECTION_LIMIT: "100", m.ANN_FLAVOR_ID: "fl",
           m.ANN_AVAILABILITY_ZONE: "az9", m.ANN_MEMBER_SUBNET_ID + ".RegionOne": "members-1"}
    ports = (m.ServicePort("http", "TCP", 80, 30080), m.ServicePort("dns", "UDP", 53, 30053),
             m.ServicePort("pending", "TCP", 81, 0))
    plan = plan_service(svc(ann, ports), [node("n1", "RegionOne", "10.0.0.1")], CONFIG, REGIONS)
    lb = plan.load_balancers["RegionOne"]
    assert (lb.flavor_id, lb.availability_zone, lb.member_subnet_id) == ("fl", "az9", "members-1")
    tcp, udp = lb.listeners
    assert (tcp.pool_protocol, tcp.lb_method, tcp.connection_limit) == ("PROXY", "SOURCE_IP", 100)
    assert tcp.monitor == Monitor("TCP", 7, 3, 1, 3)
    assert (udp.pool_protocol, udp.monitor.type if udp.monitor else None) == ("UDP", "UDP-CONNECT")
    assert any("proxy-protocol applies to TCP only" in p for p in plan.problems)
    assert any("port 81/TCP has no nodePort" in p for p in plan.problems)


def test_monitor_from_options_and_annotation_off() -> None:
    config = LoadBalancerConfig(default={"subnet_id": "s", "create_monitor": True, "monitor_timeout": 9})
    on = plan_service(svc(), [node("n1", "RegionOne", "10.0.0.1")], config, REGIONS)
    assert on.load_balancers["RegionOne"].listeners[0].monitor == Monitor("TCP", 5, 9, 1, 3)
    off = plan_service(svc({m.ANN_ENABLE_MONITOR: "false"}), [node("n1", "RegionOne", "10.0.0.1")], config, REGIONS)
    assert off.load_balancers["RegionOne"].listeners[0].monitor is None


@pytest.mark.parametrize(("ann", "kw", "floating_net", "fip", "vip"), [
    ({}, {}, "ext", "", ""),
    ({m.ANN_INTERNAL: "true"}, {}, "", "", ""),
    ({m.ANN_INTERNAL: "true"}, {"load_balancer_ip": "10.0.0.50"}, "", "", "10.0.0.50"),
    ({m.ANN_FLOATING_NETWORK_ID: "ext-b"}, {"load_balancer_ip": "203.0.113.5"}, "ext-b", "203.0.113.5", ""),
    ({m.ANN_LB_ADDRESS: "203.0.113.6"}, {}, "ext", "203.0.113.6", ""),
])
def test_floating_network_and_requested_addresses(ann: dict[str, str], kw: dict[str, Any], floating_net: str,
                                                  fip: str, vip: str) -> None:
    config = LoadBalancerConfig(default={"subnet_id": "s", "floating_network_id": "ext"})
    lb = plan_service(svc(ann, **kw), [node("n1", "RegionOne", "10.0.0.1")], config, REGIONS).load_balancers[
        "RegionOne"]
    assert (lb.floating_network_id, lb.floating_ip, lb.vip_address) == (floating_net, fip, vip)


def test_one_requested_floating_ip_cannot_serve_two_regions() -> None:
    nodes = [node("n1", "RegionOne", "10.0.0.1"), node("n2", "RegionTwo", "10.1.0.1")]
    plan = plan_service(svc(load_balancer_ip="203.0.113.5"), nodes, CONFIG, REGIONS)
    assert all(lb.floating_ip == "" for lb in plan.load_balancers.values())
    assert any("spans several regions" in p for p in plan.problems)


def test_bad_annotation_values_fall_back_and_are_reported() -> None:
    ann = {m.ANN_LB_METHOD: "RANDOM", m.ANN_KEEP_FLOATINGIP: "perhaps", m.ANN_MONITOR_DELAY: "soon"}
    plan = plan_service(svc(ann), [node("n1", "RegionOne", "10.0.0.1")], CONFIG, REGIONS)
    assert plan.load_balancers["RegionOne"].listeners[0].lb_method == "ROUND_ROBIN"
    assert len(plan.problems) == 2  # lb-method, keep-floatingip (no monitor: delay unused)


def test_a_cordoned_or_partitioned_region_keeps_its_load_balancer_with_an_empty_pool():
    """Issue 26 item 9: a region whose nodes were all NotReady or cordoned lost its
    load balancer (and floating IP): the Service's address changed."""
    nodes = [node("a1", "RegionOne", "10.0.0.1"),
             node("b1", "RegionTwo", "10.1.0.1", unschedulable=True),
             node("b2", "RegionTwo", "10.1.0.2", ready=False)]
    plan = plan_service(svc(), nodes, CONFIG, REGIONS)
    assert set(plan.load_balancers) == {"RegionOne", "RegionTwo"}
    assert all(not listener.members for listener in plan.load_balancers["RegionTwo"].listeners)
    assert any("RegionTwo: no Ready, schedulable node" in p for p in plan.problems)


def test_source_ranges_from_the_spec_or_the_annotation_and_a_bad_one_changes_nothing():
    from isthmus.ccm.openstack.loadbalancer.plan import source_ranges

    nodes = [node("a1", "RegionOne", "10.0.0.1")]
    assert source_ranges(svc(source_ranges=("10.9.0.0/16",))) == ("10.9.0.0/16",)
    assert source_ranges(svc({m.ANN_SOURCE_RANGES: "192.0.2.1/24,10.9.0.0/16"})) == ("10.9.0.0/16", "192.0.2.0/24")
    plan = plan_service(svc(source_ranges=("10.9.0.0/16",)), nodes, CONFIG, REGIONS)
    assert all(lst.allowed_cidrs == ("10.9.0.0/16",) for lst in plan.load_balancers["RegionOne"].listeners)
    bad = plan_service(svc(source_ranges=("10.9.0.0/16", "office")), nodes, CONFIG, REGIONS)
    assert bad.no_nodes and not bad.load_balancers and any("'office' is not a CIDR" in p for p in bad.problems)
