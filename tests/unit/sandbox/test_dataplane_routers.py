"""Routers on a host (isthmus.sandbox.dataplane.routers, router_reconcile): what
Neutron's routers, ports and floating IPs turn into, and the commands."""

from typing import Any

from isthmus.sandbox.dataplane import names, routers
from isthmus.sandbox.dataplane.kernel import HostState, Link, RouterState, ServerInterface
from isthmus.sandbox.dataplane.router_reconcile import (
    namespace_removals,
    outside_commands,
    router_link_commands,
    router_route_commands,
)
from isthmus.sandbox.dataplane.wiring import plan_host

HOST_NS = "isthmus-33000-abcdef-host-RegionTwo"
RT_NS = "isthmus-33000-abcdef-rt-RegionTwo-r1"
NETS: list[dict[str, Any]]
NETS = [{"id": "net-tenant-0001", "provider:network_type": "vxlan", "provider:segmentation_id": 7, "mtu": 1450},
        {"id": "net-extern-0001", "provider:network_type": "flat", "router:external": True}]
SUBNETS: list[dict[str, Any]]
SUBNETS = [{"id": "s-t", "network_id": "net-tenant-0001", "cidr": "10.9.0.0/24", "gateway_ip": "10.9.0.1"},
           {"id": "s-x", "network_id": "net-extern-0001", "cidr": "172.24.9.0/24", "gateway_ip": "172.24.9.1"}]
ROUTER: dict[str, Any]
ROUTER = {"id": "r1", "routes": [{"destination": "10.9.8.0/24", "nexthop": "10.9.0.77"}],
          "external_gateway_info": {"network_id": "net-extern-0001", "enable_snat": True}}
PORTS: list[dict[str, Any]]
PORTS = [
    {"id": "port-qr-000001", "network_id": "net-tenant-0001", "mac_address": "FA:16:3E:00:00:01", "device_id": "r1",
     "device_owner": "network:router_interface", "fixed_ips": [{"subnet_id": "s-t", "ip_address": "10.9.0.1"}],
     "binding:host_id": ""},
    {"id": "port-qg-000001", "network_id": "net-extern-0001", "mac_address": "fa:16:3e:00:00:02", "device_id": "r1",
     "device_owner": "network:router_gateway", "fixed_ips": [{"subnet_id": "s-x", "ip_address": "172.24.9.10"}],
     "binding:host_id": "regiontwo-compute", "binding:vif_type": "ovs"},
    {"id": "port-dhcp-0001", "network_id": "net-tenant-0001", "mac_address": "fa:16:3e:00:00:03", "device_id": "d",
     "device_owner": "network:dhcp", "fixed_ips": []}]
FIPS: list[dict[str, Any]]
FIPS = [{"router_id": "r1", "port_id": "vm-port", "fixed_ip_address": "10.9.0.5", "floating_ip_address": "172.24.9.50"},
        {"router_id": "r1", "port_id": None, "fixed_ip_address": None, "floating_ip_address": "172.24.9.51"}]


def planned() -> routers.Router:
    return routers.plan_routers([ROUTER], routers.router_ports([ROUTER], PORTS), FIPS, NETS, SUBNETS)["r1"]


def joined(cmds):
    return [" ".join(c) for c in cmds]


def test_a_router_gets_its_ports_routes_gateway_default_and_the_associated_floating_ips():
    router = planned()
    qg, qr = router.ports  # by port id; the DHCP port is not the router's
    assert (qr.ifname, qr.mac, qr.addresses, qr.mtu) == ("qr-port-qr-000", "fa:16:3e:00:00:01", ("10.9.0.1/24",), 1450)
    assert (qg.ifname, qg.addresses, qg.mtu) == ("qg-port-qg-000", ("172.24.9.10/24", "172.24.9.50/32"), 1500)
    assert router.routes == (("0.0.0.0/0", "172.24.9.1"), ("10.9.8.0/24", "10.9.0.77"))
    assert router.snat_address == "172.24.9.10"
    assert router.floating == (routers.Nat("172.24.9.50", "10.9.0.5"),)  # the unassociated one is not NATed


def test_a_router_with_two_floating_ips_has_both_nats_sorted():
    second = {"router_id": "r1", "port_id": "vm-port-2", "fixed_ip_address": "10.9.0.6",
              "floating_ip_address": "172.24.9.49"}
    router = routers.plan_routers([ROUTER], routers.router_ports([ROUTER], PORTS), [*FIPS, second], NETS,
                                  SUBNETS)["r1"]
    assert router.floating == (routers.Nat("172.24.9.49", "10.9.0.6"), routers.Nat("172.24.9.50", "10.9.0.5"))


def test_unbound_router_ports_are_the_agents_to_bind_and_external_networks_get_an_outside():
    assert routers.ports_to_bind(PORTS) == ["port-qr-000001"]
    assert routers.external_networks(NETS, SUBNETS) == ["net-extern-0001"]
    assert routers.external_networks(NETS, SUBNETS[:1]) == []  # no subnet, no gateway address to hold
    outside = routers.plan_outsides(["net-extern-0001"], NETS, SUBNETS)["net-extern-0001"]
    assert outside.addresses == ("172.24.9.1/24",) and outside.mtu == 1500


def test_router_and_external_networks_are_wired_without_a_server_port():
    wiring = plan_host("regiontwo-compute", "192.0.2.2", PORTS, NETS, SUBNETS, agents=[],
                       extra_networks={"net-tenant-0001", "net-extern-0001"})
    assert wiring.servers == {}
    assert wiring.networks["net-tenant-0001"].vni == 7 and wiring.networks["net-extern-0001"].vni is None


def test_the_nat_table_dnats_and_snats_floating_ips_and_masquerades_the_rest_to_the_gateway():
    rules = routers.nat_ruleset(planned())
    assert rules is not None
    assert "\t\tip daddr 172.24.9.50 dnat to 10.9.0.5\n" in rules
    assert '\t\toifname "qg-port-qg-000" ip saddr 10.9.0.5 snat to 172.24.9.50\n' in rules
    assert rules.index("snat to 172.24.9.50") < rules.index('oifname "qg-port-qg-000" snat to 172.24.9.10')
    no_snat = {**ROUTER, "external_gateway_info": {"network_id": "net-extern-0001", "enable_snat": False}}
    plain = routers.plan_routers([no_snat], routers.router_ports([no_snat], PORTS), [], NETS, SUBNETS)["r1"]
    assert routers.nat_ruleset(plain) is None


def test_a_new_router_gets_a_forwarding_namespace_and_veths_with_the_ports_mac_and_addresses():
    cmds = joined(router_link_commands(HOST_NS, RT_NS, planned(), None, HostState()))
    assert cmds[:2] == [f"ip netns add {RT_NS}", f"ip -n {RT_NS} link set lo up"]
    assert any(c.startswith(f"ip netns exec {RT_NS} sysctl -qw net.ipv4.ip_forward=1") for c in cmds)
    tap = names.tap("port-qr-000001")
    assert f"ip -n {HOST_NS} link add name {tap} type veth peer name qr-port-qr-000 netns {RT_NS}" in cmds
    assert (f"ip -n {RT_NS} link set qr-port-qr-000 address fa:16:3e:00:00:01 mtu 1450 alias port-qr-000001 up"
            in cmds)
    assert f"ip -n {RT_NS} addr add 172.24.9.50/32 dev qg-port-qg-000" in cmds
    assert f"ip -n {HOST_NS} link set {tap} master {names.bridge('net-tenant-0001')} mtu 1450 up" in cmds


def _wired(router: routers.Router) -> tuple[RouterState, HostState]:
    ifaces = tuple(ServerInterface(p.ifname, p.port_id, p.mac, p.mtu, p.addresses) for p in router.ports)
    host = HostState(links={names.tap(p.port_id): Link(names.tap(p.port_id), "veth", names.bridge(p.network_id))
                            for p in router.ports})
    return RouterState(ifaces, frozenset(router.routes), True, ""), host


def test_a_wired_router_needs_nothing_a_removed_floating_ip_and_route_are_taken_out():
    router = planned()
    present, host = _wired(router)
    assert router_link_commands(HOST_NS, RT_NS, router, present, host) == []
    assert router_route_commands(RT_NS, router, present.routes) == []
    fewer = routers.plan_routers([{**ROUTER, "routes": []}], routers.router_ports([ROUTER], PORTS), [], NETS,
                                 SUBNETS)["r1"]
    assert joined(router_link_commands(HOST_NS, RT_NS, fewer, present, host)) == [
        f"ip -n {RT_NS} addr del 172.24.9.50/32 dev qg-port-qg-000"]
    assert joined(router_route_commands(RT_NS, fewer, present.routes)) == [
        f"ip -n {RT_NS} -4 route del 10.9.8.0/24 via 10.9.0.77 proto static"]


def test_a_changed_next_hop_is_replaced_and_a_gone_port_unplugged():
    router = planned()
    present, host = _wired(router)
    moved = routers.Router("r1", router.ports[:1], (("0.0.0.0/0", "172.24.9.1"), ("10.9.8.0/24", "10.9.0.78")),
                           router.snat_address, router.floating)
    assert joined(router_route_commands(RT_NS, moved, present.routes)) == [
        f"ip -n {RT_NS} -4 route replace 10.9.8.0/24 via 10.9.0.78 proto static"]
    assert joined(router_link_commands(HOST_NS, RT_NS, moved, present, host)) == [
        f"ip -n {RT_NS} link del qr-port-qr-000"]


def test_outside_namespace_holds_the_external_gateway_and_unwanted_namespaces_go():
    outside = routers.plan_outsides(["net-extern-0001"], NETS, SUBNETS)["net-extern-0001"]
    cmds = joined(outside_commands(HOST_NS, "ns-out", outside, None, HostState()))
    assert "ip -n ns-out addr add 172.24.9.1/24 dev eth0" in cmds
    assert f"ip -n {HOST_NS} link set outnet-extern- master {names.bridge('net-extern-0001')} mtu 1500 up" in cmds
    assert joined(namespace_removals({"a"}, {"a", "b"})) == ["ip netns delete b"]


def test_interfaces_are_read_with_the_alias_ip_link_gives(monkeypatch):
    """`ip -j addr` omits the alias (iproute2 6.1): without `ip -j link` every
    interface looked foreign and was remade every pass."""
    from isthmus.sandbox.dataplane import kernel

    answers = {"link": [{"ifname": "qr-port-qr-000", "ifalias": "port-qr-000001"}],
               "addr": [{"ifname": "qr-port-qr-000", "address": "FA:16:3E:00:00:01", "mtu": 1450,
                         "addr_info": [{"local": "10.9.0.1", "prefixlen": 24, "scope": "global"},
                                       {"local": "fe80::1", "prefixlen": 64, "scope": "link"}]}]}
    monkeypatch.setattr(kernel, "run_json", lambda argv: answers[argv[4]])
    assert kernel.read_server("ns") == [
        ServerInterface("qr-port-qr-000", "port-qr-000001", "fa:16:3e:00:00:01", 1450, ("10.9.0.1/24",))]


def test_floating_ip_ports_are_bound_here_while_associated_and_unbound_after():
    fips: list[dict[str, Any]]
    fips = [{"id": "f1", "port_id": "p1", "router_id": "r1"}, {"id": "f2", "port_id": None, "router_id": None},
            {"id": "f3", "port_id": "p3", "router_id": "r1"}]
    ports = [{"id": "fp1", "device_id": "f1", "binding:host_id": ""},
             {"id": "fp2", "device_id": "f2", "binding:host_id": "host-a"},
             {"id": "fp3", "device_id": "f3", "binding:host_id": "host-a"},
             {"id": "fp4", "device_id": "gone", "binding:host_id": "host-a"}]
    assert routers.floatingip_bindings(fips, ports, "host-a") == [
        routers.FloatingIpBinding("fp1", "r1", True), routers.FloatingIpBinding("fp2", None, False),
        routers.FloatingIpBinding("fp4", None, False)]
