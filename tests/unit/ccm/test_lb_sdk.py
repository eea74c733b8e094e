"""OctaviaClient over a stand-in openstacksdk Connection: request shapes and error mapping."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from openstack import exceptions as sdk_exc

from isthmus.ccm.errors import RegionError
from isthmus.ccm.openstack.loadbalancer import model as m
from isthmus.ccm.openstack.loadbalancer.octavia import OctaviaClient
from isthmus.ccm.openstack.loadbalancer.options import LoadBalancerConfig
from isthmus.ccm.openstack.loadbalancer.plan import Member, plan_service


class Recorder:
    """Any method call is recorded and answered by ``answers[name]`` (a value or an exception)."""

    def __init__(self, **answers: Any) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []
        self.answers = answers

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            answer = self.answers.get(name)
            if isinstance(answer, Exception):
                raise answer
            return answer

        return call


def raw_lb(**kw: Any) -> SimpleNamespace:
    base = {"id": "lb-1", "name": "n", "description": "d", "provisioning_status": "ACTIVE",
            "vip_address": "10.0.0.9", "vip_port_id": "port-1", "listeners": [{"id": "l-1"}, {"id": "l-2"}]}
    return SimpleNamespace(**{**base, **kw})


def client(lb: Recorder, net: Recorder | None = None) -> OctaviaClient:
    return OctaviaClient("RegionTwo", SimpleNamespace(load_balancer=lb, network=net or Recorder()))


def test_create_load_balancer_sends_only_what_is_set() -> None:
    service = m.ServiceView("ns", "web", "u", "LoadBalancer", (m.ServicePort("", "TCP", 80, 30080),),
                            {m.ANN_FLAVOR_ID: "fl"})
    desired = plan_service(service, [m.LBNode("n", "RegionTwo", "10.0.0.1", True, False, False)],
                           LoadBalancerConfig(default={"subnet_id": "sub"}), ("RegionTwo",)).load_balancers[
        "RegionTwo"]
    lbs = Recorder(create_load_balancer=raw_lb())
    rec = client(lbs).create_load_balancer(desired)
    assert rec.listener_ids == ("l-1", "l-2") and rec.vip_port_id == "port-1"
    assert lbs.calls == [("create_load_balancer", (), {
        "name": "kube_service_kubernetes_ns_web", "description": desired.description,
        "vip_subnet_id": "sub", "flavor_id": "fl"})]


def test_batch_member_update_body() -> None:
    lbs = Recorder()
    client(lbs).replace_members("pool-1", (Member("n1", "10.0.0.1", 30080),), "sub")
    assert lbs.calls == [("put", ("/lbaas/pools/pool-1/members",), {"json": {"members": [
        {"name": "n1", "address": "10.0.0.1", "protocol_port": 30080, "subnet_id": "sub"}]}})]


def test_not_found_is_none_and_errors_name_the_region() -> None:
    lbs = Recorder(get_load_balancer=sdk_exc.NotFoundException("gone"),
                   load_balancers=sdk_exc.HttpException("503 Service Unavailable"))
    octavia = client(lbs)
    assert octavia.get_load_balancer("lb-1") is None
    with pytest.raises(RegionError) as info:
        octavia.find_load_balancers("x")
    assert info.value.region == "RegionTwo" and "list load balancers named x" in str(info.value)


def test_floating_ips() -> None:
    fip = SimpleNamespace(id="f-1", floating_ip_address="203.0.113.7", port_id="port-1", description="x")
    net = Recorder(ips=[fip], create_ip=fip)
    octavia = client(Recorder(), net)
    assert [f.address for f in octavia.floating_ips_on_port("port-1")] == ["203.0.113.7"]
    assert octavia.create_floating_ip("ext", "port-1", "desc").id == "f-1"
    octavia.set_floating_ip_port("f-1", None)
    assert net.calls[0] == ("ips", (), {"port_id": "port-1"})
    assert net.calls[1] == ("create_ip", (), {"floating_network_id": "ext", "port_id": "port-1",
                                              "description": "desc"})
    assert net.calls[2] == ("update_ip", ("f-1",), {"port_id": None})
