"""Planning of router halves: which regions, which interfaces, which routes."""

from __future__ import annotations

from isthmus.network.reconcilers import l3_plans as l3
from isthmus.network.reconcilers.l3_plans import Attached, Gateway, Route, RouterView

R1, R2, R3 = "RegionOne", "RegionTwo", "RegionThree"
TRANSIT = {R1: {4: "100.64.0.11", 6: "fd00::11"}, R2: {4: "100.64.0.12", 6: "fd00::12"},
           R3: {4: "100.64.0.13", 6: "fd00::13"}}


def view(*attached: Attached, gateway: Gateway | None = None, routes=()) -> RouterView:
    return RouterView("r", "p", "R", True, tuple(attached), gateway, tuple(routes))


def net(subnet: str, cidr: str, *regions: str) -> Attached:
    return Attached(subnet, f"net-{subnet}", cidr, frozenset(regions))


A = net("a", "10.1.0.0/24", R1)
B = net("b", "10.2.0.0/24", R2)
STRETCHED = net("s", "10.3.0.0/24", R1, R2)
V6 = net("v6", "fd01::/64", R2)
EXT = Gateway("ext", R2, True, (("ext-sub", "172.24.4.10"),), ("172.24.4.0/24",))


def test_halves_are_the_regions_of_attached_networks_and_of_the_gateway():
    assert l3.halves(view(A)) == [R1]
    assert l3.halves(view(A, B)) == [R1, R2]
    assert l3.halves(view(A, gateway=EXT)) == [R1, R2]
    assert l3.halves(view(net("unused", "10.9.0.0/24"))) == []  # no copy anywhere yet: no half


def test_one_region_needs_no_transit():
    assert not l3.needs_transit(view(A))
    assert l3.needs_transit(view(A, B))


def test_each_half_routes_the_subnets_it_lacks_to_a_half_that_has_them():
    spec = l3.desired_half(view(A, B), R1, TRANSIT)
    assert spec.subnets == {"a"}
    assert spec.routes == {Route("10.2.0.0/24", "100.64.0.12")}
    assert l3.desired_half(view(A, B), R2, TRANSIT).routes == {Route("10.1.0.0/24", "100.64.0.11")}


def test_a_stretched_subnet_is_on_link_in_every_region_it_lives_in():
    assert l3.desired_half(view(A, STRETCHED), R1, TRANSIT).routes == frozenset()
    spec = l3.desired_half(view(A, STRETCHED), R2, TRANSIT)
    assert spec.subnets == {"s"}
    assert spec.routes == {Route("10.1.0.0/24", "100.64.0.11")}


def test_a_subnet_in_several_regions_is_reached_through_the_first_by_name():
    spec = l3.desired_half(view(net("x", "10.5.0.0/24", R2, R3), A), R1, TRANSIT)
    assert spec.routes == {Route("10.5.0.0/24", "100.64.0.13")}  # "RegionThree" < "RegionTwo"


def test_ipv6_subnets_route_over_the_ipv6_transit_addresses():
    assert l3.desired_half(view(A, V6), R1, TRANSIT).routes == {Route("fd01::/64", "fd00::12")}


def test_routes_wait_for_a_transit_address_not_allocated_yet():
    assert l3.desired_half(view(A, B), R1, {R1: TRANSIT[R1]}).routes == frozenset()


def test_only_the_external_networks_region_holds_the_gateway_others_default_to_it():
    gw = l3.desired_half(view(A, gateway=EXT), R2, TRANSIT)
    assert gw.gateway == EXT
    assert gw.routes == {Route("10.1.0.0/24", "100.64.0.11")}
    other = l3.desired_half(view(A, gateway=EXT), R1, TRANSIT)
    assert other.gateway is None
    assert other.routes == {Route("0.0.0.0/0", "100.64.0.12")}


def test_a_dual_stack_external_network_gets_both_default_routes():
    ext = Gateway("ext", R2, True, (), ("172.24.4.0/24", "2001:db8::/64"))
    assert l3.desired_half(view(A, gateway=ext), R1, TRANSIT).routes == {
        Route("0.0.0.0/0", "100.64.0.12"), Route("::/0", "fd00::12")}


def test_user_routes_are_merged_on_link_where_possible_else_towards_the_next_hop():
    user = [Route("192.168.7.0/24", "10.2.0.50"), Route("192.168.8.0/24", "172.24.4.1")]
    r = view(A, B, gateway=EXT, routes=user)
    assert l3.desired_half(r, R2, TRANSIT).routes == {
        Route("10.1.0.0/24", "100.64.0.11"), Route("192.168.7.0/24", "10.2.0.50"),
        Route("192.168.8.0/24", "172.24.4.1")}
    assert l3.desired_half(r, R1, TRANSIT).routes == {
        Route("10.2.0.0/24", "100.64.0.12"), Route("0.0.0.0/0", "100.64.0.12"),
        Route("192.168.7.0/24", "100.64.0.12"), Route("192.168.8.0/24", "100.64.0.12")}


def test_plan_orders_nothing_when_converged():
    spec = l3.desired_half(view(A, B), R1, TRANSIT)
    state = l3.HalfState(frozenset({"a"}), spec.routes, None)
    assert l3.plan_half(spec, state).empty


def test_plan_adds_and_removes_interfaces_and_replaces_routes():
    spec = l3.desired_half(view(A, B), R1, TRANSIT)
    state = l3.HalfState(frozenset({"old"}), frozenset({Route("10.9.0.0/24", "100.64.0.13")}), None)
    plan = l3.plan_half(spec, state)
    assert plan.add_subnets == ["a"] and plan.remove_subnets == ["old"]
    assert plan.routes == [Route("10.2.0.0/24", "100.64.0.12")]


def test_plan_sets_moves_and_clears_the_gateway():
    spec = l3.desired_half(view(A, gateway=EXT), R2, TRANSIT)
    unset = l3.HalfState(frozenset(), spec.routes, None)
    assert l3.plan_half(spec, unset).set_gateway == EXT
    snat_off = l3.HalfState(frozenset(), spec.routes, "ext", frozenset(EXT.fixed_ips), False)
    assert l3.plan_half(spec, snat_off).set_gateway == EXT
    same = l3.HalfState(frozenset(), spec.routes, "ext", frozenset(EXT.fixed_ips), True)
    assert l3.plan_half(spec, same).empty
    elsewhere = l3.desired_half(view(A, gateway=EXT), R1, TRANSIT)
    stale = l3.HalfState(frozenset({"a"}), elsewhere.routes, "ext", frozenset(), True)
    assert l3.plan_half(elsewhere, stale).clear_gateway


def test_gateway_body_keeps_centrals_addresses():
    assert l3.gateway_body(EXT) == {"network_id": "ext", "enable_snat": True,
                                    "external_fixed_ips": [{"subnet_id": "ext-sub", "ip_address": "172.24.4.10"}]}


FIP = l3.FloatingIp("f1", "p", "172.24.4.20", "ext", "port-1", "10.1.0.5")


def test_floating_ips_are_created_moved_adopted_and_removed():
    assert l3.plan_fips([FIP], []).create == [FIP]
    tagged = {"id": "rf", "floating_ip_address": "172.24.4.20", "port_id": "port-1", "fixed_ip_address": "10.1.0.5",
              "description": l3.fip_description("f1")}
    assert l3.plan_fips([FIP], [tagged]) == l3.FipPlan()
    moved = {**tagged, "port_id": "port-2"}
    assert l3.plan_fips([FIP], [moved]).move == [("rf", FIP)]
    foreign = {**tagged, "description": ""}  # same address, made by someone else: adopted
    assert l3.plan_fips([FIP], [foreign]).move == [("rf", FIP)]
    assert l3.plan_fips([], [tagged]).delete == ["rf"]
    assert l3.plan_fips([], [foreign]).delete == []  # not ours: never deleted
    assert l3.tagged_fip(tagged) == "f1" and l3.tagged_fip(foreign) is None


# ------------------------------------------------------------- status at central
def _regional_port(status: str, host: str = "compute-RegionOne") -> dict:
    return {"status": status, "binding:host_id": host, "binding:vif_type": "ovs",
            "binding:vif_details": {"port_filter": True}, "binding:vnic_type": "normal"}


def test_a_router_port_is_bound_at_central_once_every_region_shows_its_counterpart_active():
    unbound = {"binding:host_id": "", "binding:profile": {}}
    both = {"RegionOne": _regional_port("ACTIVE"), "RegionTwo": _regional_port("ACTIVE", "compute-RegionTwo")}
    binding = l3.router_port_binding(unbound, both)
    assert binding is not None
    assert binding["binding:host_id"] == "compute-RegionOne"
    assert binding["binding:profile"]["isthmus"]["region"] == "RegionOne"
    assert binding["binding:profile"]["isthmus"]["vif_type"] == "ovs"
    assert l3.router_port_binding({**unbound, **binding}, both) is None  # already so: no write


def test_a_router_port_is_unbound_while_any_region_lacks_it_or_has_it_down():
    bound = {"binding:host_id": "compute-RegionOne", "binding:profile": {"isthmus": {"region": "RegionOne"}}}
    unbind = {"binding:host_id": "", "binding:profile": {}}
    assert l3.router_port_binding(bound, {"RegionOne": _regional_port("ACTIVE"), "RegionTwo": None}) == unbind
    assert l3.router_port_binding(bound, {"RegionOne": _regional_port("DOWN")}) == unbind
    assert l3.router_port_binding(bound, {}) == unbind  # its network lives in no region yet
    assert l3.router_port_binding({"binding:host_id": None, "binding:profile": None}, {}) is None


def test_a_floating_ip_takes_its_counterparts_status_once_on_the_same_port():
    fip = l3.FloatingIp("f1", "p", "172.24.4.10", "ext", "port-1", "10.0.0.5")
    here = {"floating_ip_address": "172.24.4.10", "port_id": "port-1", "status": "ACTIVE"}
    assert l3.floatingip_status(fip, [here]) == "ACTIVE"
    assert l3.floatingip_status(fip, [{**here, "status": "DOWN"}]) == "DOWN"
    assert l3.floatingip_status(fip, [{**here, "port_id": "port-2"}]) == "DOWN"  # not moved yet
    assert l3.floatingip_status(fip, []) == "DOWN"
    assert l3.floatingip_report("RegionTwo", "ACTIVE") == {
        "binding:profile": {"isthmus": {"region": "RegionTwo", "floatingip_status": "ACTIVE"}}}


def test_a_router_with_hints_gets_halves_only_in_their_regions():
    a = Attached("s1", "n1", "10.0.1.0/24", frozenset({"RegionOne", "RegionTwo"}))
    view = RouterView("r", "p", "r", True, (a,), regions=frozenset({"RegionOne"}))
    assert l3.halves(view) == ["RegionOne"]
    assert l3.halves(RouterView("r", "p", "r", True, (a,))) == ["RegionOne", "RegionTwo"]
