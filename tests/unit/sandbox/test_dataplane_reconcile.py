"""The commands that make a host match its wiring (isthmus.sandbox.dataplane.reconcile)."""

from isthmus.sandbox.dataplane import names
from isthmus.sandbox.dataplane.kernel import HostState, Link, ServerInterface
from isthmus.sandbox.dataplane.reconcile import network_commands, removal_commands, server_commands
from isthmus.sandbox.dataplane.wiring import HostWiring, NetworkWiring, RemotePort, Server, Vif

NS = "isthmus-33000-abcdef-host-RegionOne"
PREFIX = "isthmus-33000-abcdef-vm-RegionOne-"
NET_ID = "0123456789abcdef"
BRIDGE, VXLAN = names.bridge(NET_ID), names.vxlan(1042)
REMOTE = RemotePort("fa:16:3e:00:00:02", ("10.7.0.6",), "192.0.2.2")
VIF = Vif("port-1234567890", NET_ID, "fa:16:3e:00:00:01", ("10.7.0.5/24",), ("10.7.0.1",), 1450)
TAP = names.tap(VIF.port_id)


def wiring(remote=frozenset({REMOTE}), servers=True) -> HostWiring:
    return HostWiring(servers={"vm-a": Server("vm-a", (VIF,))} if servers else {},
                      networks={NET_ID: NetworkWiring(NET_ID, 1042, 1450, frozenset(remote))})


def wired_state() -> HostState:
    return HostState(
        links={BRIDGE: Link(BRIDGE, "bridge"), VXLAN: Link(VXLAN, "vxlan", BRIDGE, 1042),
               TAP: Link(TAP, "veth", BRIDGE)},
        fdb={(VXLAN, REMOTE.mac, REMOTE.vtep), (VXLAN, "00:00:00:00:00:00", REMOTE.vtep)},
        neighbours={(VXLAN, "10.7.0.6", REMOTE.mac)})


def joined(cmds):
    return [" ".join(c) for c in cmds]


def test_names_fit_the_kernels_limit_and_namespaces_carry_the_sandbox():
    from pathlib import Path

    from isthmus.sandbox.layout import Layout

    assert max(len(n) for n in (BRIDGE, TAP, names.vxlan(16_777_215), names.UNDERLAY_LINK)) <= names.IFNAME_MAX
    a, b = Layout(Path("/tmp/a"), base_port=33000), Layout(Path("/tmp/b"), base_port=33000)
    assert names.host_namespace(a, "RegionOne") != names.host_namespace(b, "RegionOne")
    assert names.prefix(Layout(Path("/tmp/a"), base_port=34000)) != names.prefix(a)


def test_an_empty_host_gets_bridge_vxlan_with_the_vni_fdb_flooding_and_arp_answers():
    cmds = joined(network_commands(NS, "192.0.2.1", wiring(), HostState()))
    assert f"ip -n {NS} link add name {BRIDGE} type bridge" in cmds
    assert (f"ip -n {NS} link add name {VXLAN} type vxlan id 1042 local 192.0.2.1 dstport 4789 dev underlay "
            "nolearning proxy") in cmds
    assert f"bridge -n {NS} fdb replace fa:16:3e:00:00:02 dev {VXLAN} dst 192.0.2.2 self permanent" in cmds
    assert f"bridge -n {NS} fdb append 00:00:00:00:00:00 dev {VXLAN} dst 192.0.2.2 self permanent" in cmds
    assert f"ip -n {NS} neigh replace 10.7.0.6 lladdr fa:16:3e:00:00:02 dev {VXLAN} nud permanent" in cmds


def test_a_wired_host_needs_nothing_and_a_gone_remote_port_is_unprogrammed():
    assert network_commands(NS, "192.0.2.1", wiring(), wired_state()) == []
    cmds = joined(network_commands(NS, "192.0.2.1", wiring(remote=()), wired_state()))
    assert sorted(cmds) == sorted([
        f"bridge -n {NS} fdb del fa:16:3e:00:00:02 dev {VXLAN} dst 192.0.2.2 self",
        f"bridge -n {NS} fdb del 00:00:00:00:00:00 dev {VXLAN} dst 192.0.2.2 self",
        f"ip -n {NS} neigh del 10.7.0.6 dev {VXLAN}"])


def test_a_moved_remote_port_is_deleted_at_its_old_tunnel_ip_before_added_at_the_new():
    moved = RemotePort(REMOTE.mac, REMOTE.ips, "192.0.2.3")
    cmds = joined(network_commands(NS, "192.0.2.1", wiring(remote={moved}), wired_state()))
    old = cmds.index(f"bridge -n {NS} fdb del fa:16:3e:00:00:02 dev {VXLAN} dst 192.0.2.2 self")
    new = cmds.index(f"bridge -n {NS} fdb replace fa:16:3e:00:00:02 dev {VXLAN} dst 192.0.2.3 self permanent")
    assert old < new


def test_a_new_server_gets_a_namespace_an_interface_with_the_ports_values_and_a_default_route():
    vm = PREFIX + "vm-a"
    cmds = joined(server_commands(NS, vm, Server("vm-a", (VIF,)), None, set(), wired_state()))
    assert cmds[:2] == [f"ip netns add {vm}", f"ip -n {vm} link set lo up"]
    assert f"ip -n {vm} link set eth0 address fa:16:3e:00:00:01 mtu 1450 alias {VIF.port_id} up" in cmds
    assert f"ip -n {vm} addr add 10.7.0.5/24 dev eth0" in cmds
    assert f"ip -n {NS} link set {TAP} master {BRIDGE} mtu 1450 up" in cmds
    assert cmds[-1] == f"ip -n {vm} -4 route replace default via 10.7.0.1"


def test_a_server_whose_port_changed_address_is_fixed_in_place_and_a_correct_one_is_left_alone():
    vm = PREFIX + "vm-a"
    right = ServerInterface("eth0", VIF.port_id, VIF.mac, 1450, ("10.7.0.5/24",))
    assert server_commands(NS, vm, Server("vm-a", (VIF,)), [right], {"10.7.0.1"}, wired_state()) == []
    wrong = ServerInterface("eth0", VIF.port_id, "fa:16:3e:99:99:99", 1450, ("10.7.0.9/24",))
    cmds = joined(server_commands(NS, vm, Server("vm-a", (VIF,)), [wrong], {"10.7.0.1"}, wired_state()))
    assert cmds == [f"ip -n {vm} link set eth0 address fa:16:3e:00:00:01 mtu 1450 up",
                    f"ip -n {vm} addr del 10.7.0.9/24 dev eth0", f"ip -n {vm} addr add 10.7.0.5/24 dev eth0"]


def test_what_nothing_wants_is_removed_servers_first_and_only_our_own():
    state = wired_state()
    state.links["underlay"] = Link("underlay", "veth")
    stale = {PREFIX + "vm-gone"}
    cmds = joined(removal_commands(NS, wiring(servers=False), state, stale, PREFIX))
    assert cmds == [f"ip -n {NS} link del {TAP}", f"ip netns delete {PREFIX}vm-gone"]
    cmds = joined(removal_commands(NS, HostWiring(), state, set(), PREFIX))
    assert cmds == [f"ip -n {NS} link del {TAP}", f"ip -n {NS} link del {BRIDGE}", f"ip -n {NS} link del {VXLAN}"]


def test_on_an_ovn_host_a_server_is_plugged_into_br_int_with_its_port_as_iface_id():
    from isthmus.sandbox.dataplane.reconcile import OvsPlug

    ovs = OvsPlug(("ovs-vsctl", "--db=unix:/x/db.sock"), ("ethtool",))
    vm = PREFIX + "vm-a"
    cmds = joined(server_commands(NS, vm, Server("vm-a", (VIF,)), None, set(), HostState(), ovs))
    assert not [c for c in cmds if " master " in c]  # no Linux bridge on an OVN host
    assert f"ip -n {NS} link set {TAP} mtu 1450 up" in cmds
    assert (f"ovs-vsctl --db=unix:/x/db.sock --may-exist add-port br-int {TAP} -- set Interface {TAP} "
            f"external_ids:iface-id={VIF.port_id} external_ids:attached-mac={VIF.mac} "
            "external_ids:iface-status=active") in cmds
    # The userspace datapath fills no checksums: transmit offload off on the server's end.
    assert f"ip netns exec {vm} ethtool -K eth0 tx off" in cmds
    # A server's tap nothing wants leaves br-int before its link goes.
    state = HostState(links={TAP: Link(TAP, "veth")})
    assert joined(removal_commands(NS, HostWiring(), state, set(), PREFIX, ovs)) == [
        f"ovs-vsctl --db=unix:/x/db.sock --if-exists del-port br-int {TAP}", f"ip -n {NS} link del {TAP}"]
