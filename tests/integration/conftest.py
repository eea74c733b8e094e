"""Fixtures of the networking integration tests: connections per region and a
central network stretched over every region (removed afterwards)."""

from __future__ import annotations

import uuid

import pytest

from tests.integration.helpers import CENTRAL, delete_network, delete_user_ports, eventually


@pytest.fixture
def central(sandbox):
    return sandbox.connect(CENTRAL)


@pytest.fixture
def admin(sandbox):
    return {r: sandbox.connect(r, cloud="isthmus-admin") for r in (CENTRAL, *sandbox.regions)}


@pytest.fixture
def stretched(sandbox, central):
    """A central network with an IPv4 subnet; servers and the network are removed afterwards."""
    name = f"x-{uuid.uuid4().hex[:8]}"
    net = central.network.create_network(name=name)
    subnet = central.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.77.0.0/24", name=name)
    yield net, subnet
    for region in sandbox.regions:
        conn = sandbox.connect(region)
        for server in conn.compute.servers(name=name):
            conn.compute.delete_server(server)
        for server in conn.compute.servers(name=name):
            conn.compute.wait_for_delete(server, wait=120)
    delete_user_ports(central, net.id)
    eventually(lambda: delete_network(central, net.id), timeout=60, what=f"delete of network {net.id}")
