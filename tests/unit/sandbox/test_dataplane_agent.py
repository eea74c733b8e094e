"""The dataplane agent's pass: what it reads, and that an outage changes nothing."""

from typing import cast

import pytest

from isthmus.clients.neutron import NeutronClient, Unavailable
from isthmus.sandbox.dataplane import agent as agent_mod
from isthmus.sandbox.dataplane.agent import Agent, AgentConfig, read_wiring

CONFIG = AgentConfig(region="RegionOne", host="regionone-compute", local_ip="192.0.2.1",
                     host_namespace="ns-host", server_namespace_prefix="ns-vm-", router_namespace_prefix="ns-rt-",
                     outside_namespace_prefix="ns-out-", auth_url="http://x/v3",
                     username="u", password="p", project_name="service")
PORT = {"id": "p1", "network_id": "n1", "mac_address": "fa:16:3e:00:00:01", "device_id": "vm-a",
        "device_owner": "compute:az1", "fixed_ips": [{"subnet_id": "s1", "ip_address": "10.0.0.5"}],
        "binding:host_id": "regionone-compute", "binding:vif_type": "ovs"}


class FakeNeutron:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[tuple[str, dict]] = []

    def list(self, collection, **filters):
        self.calls.append((collection, filters))
        if self.fail:
            raise Unavailable("RegionOne Neutron unreachable")
        return {"ports": [PORT],
                "networks": [{"id": "n1", "provider:network_type": "vxlan", "provider:segmentation_id": 5,
                              "mtu": 1450}],
                "subnets": [{"id": "s1", "network_id": "n1", "cidr": "10.0.0.0/24", "gateway_ip": "10.0.0.1"}],
                "agents": [], "routers": [], "floatingips": []}[collection]


def test_it_reads_its_hosts_ports_its_routers_then_only_their_networks():
    neutron = FakeNeutron()
    reading = read_wiring(as_client(neutron), CONFIG)
    assert neutron.calls[0] == ("ports", {"binding:host_id": "regionone-compute", "fields": agent_mod.PORT_FIELDS})
    assert [c for c, _ in neutron.calls[1:3]] == ["routers", "networks"]  # no router: no router port read
    assert neutron.calls[2][1]["router:external"] is True
    assert [(c, f.get("network_id") or f.get("id")) for c, f in neutron.calls[3:6]] == [
        ("networks", ["n1"]), ("subnets", ["n1"]), ("ports", ["n1"])]
    assert list(reading.wiring.servers) == ["vm-a"] and reading.wiring.networks["n1"].vni == 5
    assert reading.unbound_router_ports == [] and reading.wiring.routers == {}


def test_when_neutron_cannot_be_read_nothing_is_changed(monkeypatch):
    ran = []

    def run(argv, timeout=0):
        ran.append(argv)
        return ""
    monkeypatch.setattr(agent_mod.kernel, "run", run)
    monkeypatch.setattr(agent_mod.kernel, "run_json", lambda argv: pytest.fail(f"read the kernel: {argv}"))
    assert Agent(CONFIG, as_client(FakeNeutron(fail=True))).run_once() is False
    assert ran == []


def as_client(fake: FakeNeutron) -> NeutronClient:
    """The agent calls only list() and update(), which the fake answers."""
    return cast(NeutronClient, fake)


class RouterNeutron(FakeNeutron):
    """A region with one router whose interface port nobody has bound yet."""

    ROUTER_PORT = {"id": "rp1", "network_id": "n1", "mac_address": "fa:16:3e:00:00:09", "device_id": "r1",
                   "device_owner": "network:router_interface",
                   "fixed_ips": [{"subnet_id": "s1", "ip_address": "10.0.0.1"}], "binding:host_id": ""}

    def __init__(self) -> None:
        super().__init__()
        self.updates: list[tuple[str, str, dict]] = []

    def list(self, collection, **filters):
        self.calls.append((collection, filters))
        if collection == "routers":
            return [{"id": "r1", "routes": [], "external_gateway_info": None}]
        if collection == "ports" and filters.get("device_owner") == "network:floatingip":
            return []
        if collection == "ports" and "device_owner" in filters:
            return [self.ROUTER_PORT, PORT]  # PORT is no router's: ignored
        if collection == "ports" and "binding:host_id" in filters:
            return []
        return {"ports": [self.ROUTER_PORT],
                "networks": [{"id": "n1", "provider:network_type": "vxlan", "provider:segmentation_id": 5}],
                "subnets": [{"id": "s1", "network_id": "n1", "cidr": "10.0.0.0/24", "gateway_ip": "10.0.0.1"}],
                "agents": [], "floatingips": []}[collection]

    def update(self, collection, obj_id, changes, if_revision=None):
        self.updates.append((collection, obj_id, changes))
        return {}


def test_a_routers_network_is_wired_without_servers_and_its_unbound_ports_are_bound_to_the_host(monkeypatch):
    neutron = RouterNeutron()
    reading = read_wiring(as_client(neutron), CONFIG)
    assert list(reading.wiring.networks) == ["n1"] and reading.wiring.servers == {}
    assert [p.port_id for p in reading.wiring.routers["r1"].ports] == ["rp1"]
    assert reading.unbound_router_ports == ["rp1"]
    monkeypatch.setattr(Agent, "_apply", lambda self, wanted, full_check=False: None)
    assert Agent(CONFIG, as_client(neutron)).run_once() is True
    assert neutron.updates == [("ports", "rp1", {"binding:host_id": "regionone-compute"})]


def test_a_woken_agent_passes_at_once_after_a_quiet_spell_and_at_most_once_a_gap_in_a_burst():
    from isthmus.sandbox.dataplane.agent import settle_delay

    assert settle_delay(began=100.0, now=112.0, min_gap=1.0) == 0.0  # woken long after its pass began
    assert settle_delay(began=100.0, now=100.25, min_gap=1.0) == 0.75  # mid-burst: the rest of the gap
    assert settle_delay(began=100.0, now=100.25, min_gap=0.0) == 0.0
