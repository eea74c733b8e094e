"""What a host's dataplane should carry, from Neutron's answers (isthmus.sandbox.dataplane.wiring)."""

from isthmus.network import SHADOW_OWNER
from isthmus.sandbox.dataplane.wiring import RemotePort, plan_host

HOST = "regionone-compute"
NET = {"id": "net-1", "provider:network_type": "vxlan", "provider:segmentation_id": 1042, "mtu": 1450}
SUBNET = {"id": "sub-1", "network_id": "net-1", "cidr": "10.7.0.0/24", "gateway_ip": "10.7.0.1"}
AGENTS = [
    {"host": HOST, "configurations": {"tunneling_ip": "192.0.2.1"}},
    {"host": "regiontwo-compute", "configurations": {"tunneling_ip": "192.0.2.2"}},  # a shadow agent
    {"host": "regionthree-compute", "configurations": {"tunneling_ip": "192.0.2.3"}},
]


def port(pid, mac, ip, host, owner="compute:az1", device="vm-" + "a", vif="ovs", net="net-1"):
    return {"id": pid, "network_id": net, "mac_address": mac, "device_id": device, "device_owner": owner,
            "fixed_ips": [{"subnet_id": "sub-1", "ip_address": ip}], "binding:host_id": host, "binding:vif_type": vif}


def test_a_local_server_port_becomes_an_interface_with_neutrons_mac_ip_and_gateway():
    plan = plan_host(HOST, "192.0.2.1", [port("p1", "FA:16:3E:00:00:01", "10.7.0.5", HOST)], [NET], [SUBNET], AGENTS)
    (vif,) = plan.servers["vm-a"].vifs
    assert (vif.port_id, vif.mac, vif.addresses, vif.gateways, vif.mtu) == (
        "p1", "fa:16:3e:00:00:01", ("10.7.0.5/24",), ("10.7.0.1",), 1450)
    assert plan.networks["net-1"].vni == 1042


def test_remote_ports_go_to_the_tunnel_ip_their_hosts_agent_reports_and_are_flooded_to():
    ports = [port("p1", "fa:16:3e:00:00:01", "10.7.0.5", HOST),
             port("p2", "fa:16:3e:00:00:02", "10.7.0.6", "regiontwo-compute", owner=SHADOW_OWNER, device="vm-b"),
             port("p3", "fa:16:3e:00:00:03", "10.7.0.7", "regionthree-compute", owner=SHADOW_OWNER, device="vm-c")]
    net = plan_host(HOST, "192.0.2.1", ports, [NET], [SUBNET], AGENTS).networks["net-1"]
    assert net.remote_ports == {RemotePort("fa:16:3e:00:00:02", ("10.7.0.6",), "192.0.2.2"),
                                RemotePort("fa:16:3e:00:00:03", ("10.7.0.7",), "192.0.2.3")}
    assert net.flood_vteps == {"192.0.2.2", "192.0.2.3"}


def test_a_shadow_is_never_a_local_server_and_unbound_or_agentless_ports_are_not_forwarded_to():
    ports = [port("p1", "fa:16:3e:00:00:01", "10.7.0.5", HOST),
             port("p2", "fa:16:3e:00:00:02", "10.7.0.6", HOST, owner=SHADOW_OWNER, device="vm-b"),
             port("p3", "fa:16:3e:00:00:03", "10.7.0.7", "regionthree-compute", vif="binding_failed"),
             port("p4", "fa:16:3e:00:00:04", "10.7.0.8", "nowhere-compute", owner=SHADOW_OWNER)]
    plan = plan_host(HOST, "192.0.2.1", ports, [NET], [SUBNET], AGENTS)
    assert list(plan.servers) == ["vm-a"]
    assert plan.networks["net-1"].remote_ports == frozenset()


def test_a_network_without_local_servers_is_not_wired_and_no_servers_means_nothing():
    remote_only = [port("p2", "fa:16:3e:00:00:02", "10.7.0.6", "regiontwo-compute", owner=SHADOW_OWNER)]
    plan = plan_host(HOST, "192.0.2.1", remote_only, [NET], [SUBNET], AGENTS)
    assert not plan.servers and not plan.networks


def test_a_changed_vni_or_tunnel_ip_changes_the_plan():
    ports = [port("p1", "fa:16:3e:00:00:01", "10.7.0.5", HOST),
             port("p2", "fa:16:3e:00:00:02", "10.7.0.6", "regiontwo-compute", owner=SHADOW_OWNER)]
    before = plan_host(HOST, "192.0.2.1", ports, [NET], [SUBNET], AGENTS)
    moved = [*AGENTS[:1], {"host": "regiontwo-compute", "configurations": {"tunneling_ip": "192.0.2.9"}}]
    after = plan_host(HOST, "192.0.2.1", ports, [{**NET, "provider:segmentation_id": 7}], [SUBNET], moved)
    assert after.networks["net-1"].vni == 7
    assert after.networks["net-1"].flood_vteps == {"192.0.2.9"} != before.networks["net-1"].flood_vteps


def test_a_vlan_network_is_bridged_locally_without_a_tunnel():
    vlan = {**NET, "provider:network_type": "vlan", "provider:segmentation_id": 100}
    ports = [port("p1", "fa:16:3e:00:00:01", "10.7.0.5", HOST),
             port("p2", "fa:16:3e:00:00:02", "10.7.0.6", "regiontwo-compute")]
    net = plan_host(HOST, "192.0.2.1", ports, [vlan], [SUBNET], AGENTS).networks["net-1"]
    assert net.vni is None and net.remote_ports == frozenset()
