"""``sandbox up --octavia``: a real Octavia per region (API, worker, amphora flows with
no-op drivers) whose load balancers reach ACTIVE, catalogued as load-balancer."""

from __future__ import annotations

import uuid

import pytest

pytestmark = pytest.mark.integration


@pytest.fixture
def lb_subnets(sandbox):
    """A demo subnet per region for the load balancers' VIPs and members."""
    name = f"lb-{uuid.uuid4().hex[:8]}"
    made = {}
    for index, region in enumerate(sandbox.regions):
        conn = sandbox.connect(region)
        net = conn.network.create_network(name=name)
        made[region] = (conn, net, conn.network.create_subnet(network_id=net.id, ip_version=4,
                                                              cidr=f"10.{120 + index}.0.0/24"))
    yield {region: subnet for region, (_, _, subnet) in made.items()}
    for conn, net, _ in made.values():
        for lb in conn.load_balancer.load_balancers(name=name):
            conn.load_balancer.delete_load_balancer(lb, cascade=True, ignore_missing=True)
        conn.network.delete_network(net, ignore_missing=True)


def test_each_region_serves_load_balancers_that_reach_active(sandbox, lb_subnets):
    for region, subnet in lb_subnets.items():
        conn = sandbox.connect(region)
        endpoint = conn.load_balancer.get_endpoint()
        port = sandbox.base_port + 10 * (sandbox.regions.index(region) + 1) + 5
        assert endpoint.startswith(f"http://127.0.0.1:{port}/"), endpoint  # the region's own Octavia
        lb = conn.load_balancer.create_load_balancer(name=subnet.name or f"lb-{region}", vip_subnet_id=subnet.id)
        lb = conn.load_balancer.wait_for_load_balancer(lb.id, wait=120)
        assert lb.provisioning_status == "ACTIVE"
        listener = conn.load_balancer.create_listener(load_balancer_id=lb.id, protocol="TCP", protocol_port=80)
        conn.load_balancer.wait_for_load_balancer(lb.id, wait=120)
        pool = conn.load_balancer.create_pool(listener_id=listener.id, protocol="TCP", lb_algorithm="ROUND_ROBIN")
        conn.load_balancer.wait_for_load_balancer(lb.id, wait=120)
        conn.load_balancer.create_member(pool, address=subnet.cidr.replace("0/24", "5"), protocol_port=30080,
                                         subnet_id=subnet.id)
        conn.load_balancer.wait_for_load_balancer(lb.id, wait=120)
        conn.load_balancer.create_health_monitor(pool_id=pool.id, type="TCP", delay=5, timeout=3, max_retries=2)
        lb = conn.load_balancer.wait_for_load_balancer(lb.id, wait=120)
        assert lb.provisioning_status == "ACTIVE"
        members = [(m.address, m.provisioning_status) for m in conn.load_balancer.members(pool)]
        assert members == [(subnet.cidr.replace("0/24", "5"), "ACTIVE")]
        # Each region's Octavia holds only its own load balancers.
        others = [r for r in sandbox.regions if r != region]
        for other in others:
            assert sandbox.connect(other).load_balancer.find_load_balancer(lb.id, ignore_missing=True) is None
        conn.load_balancer.delete_load_balancer(lb.id, cascade=True)
        conn.load_balancer.wait_for_delete(lb, wait=120)
