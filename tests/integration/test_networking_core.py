"""Networking core (issue 8): central changes reach every copy; nothing is
wiped on a read that failed or a 404 central never recorded as its own delete."""

from __future__ import annotations

import uuid

import pytest

from tests.integration.helpers import CENTRAL, eventually
from tests.integration.test_networking import _enqueue, _network_or_none, _port_or_none, boot

pytestmark = pytest.mark.integration


def _job(sandbox, job_type: str, resource_id: str):
    from isthmus.db import make_engine
    from isthmus.jobs import JobStore
    from isthmus.sandbox.layout import Layout

    return JobStore(make_engine(Layout.load(sandbox.state_dir).isthmus_db_url)).find(job_type, resource_id)


def _finished(sandbox, job_type: str, resource_id: str):
    job = _job(sandbox, job_type, resource_id)
    return job if job is not None and job.status in ("SUCCESS", "FAIL") else None


def test_every_user_settable_port_attribute_reaches_the_regional_copy(sandbox, central, admin, stretched):
    net, subnet = stretched
    one = sandbox.regions[0]
    conn = sandbox.connect(one)
    server = conn.compute.wait_for_server(boot(conn, net.name, net.id), wait=240)
    (port,) = list(admin[one].network.ports(device_id=server.id))
    sg2 = central.network.create_security_group(name=f"{net.name}-sg2")
    central.network.create_security_group_rule(security_group_id=sg2.id, direction="ingress", protocol="tcp",
                                               port_range_min=22, port_range_max=22)
    try:
        central.network.update_port(port.id, name="renamed", description="set at central", admin_state_up=False,
                                    security_group_ids=[sg2.id],
                                    allowed_address_pairs=[{"ip_address": "10.77.0.200"}],
                                    extra_dhcp_opts=[{"opt_name": "domain-search", "opt_value": "example.org"}])

        def copy_matches():
            copy = admin[one].network.get_port(port.id)
            return (copy.name == "renamed" and copy.description == "set at central" and not copy.is_admin_state_up
                    and copy.security_group_ids == [sg2.id]
                    and [p["ip_address"] for p in copy.allowed_address_pairs] == ["10.77.0.200"]
                    and [(o["opt_name"], o["opt_value"]) for o in copy.extra_dhcp_opts]
                    == [("domain-search", "example.org")])

        eventually(copy_matches, timeout=60, what="central's port update in the regional copy")
        # The newly referenced group was copied, with its rules, to the enforcing region.
        group = admin[one].network.get_security_group(sg2.id)
        assert any(r["port_range_min"] == 22 for r in group.security_group_rules)

        central.network.update_port(port.id, security_group_ids=[], port_security_enabled=False,
                                    allowed_address_pairs=[], extra_dhcp_opts=[
                                        {"opt_name": "domain-search", "opt_value": None}])
        eventually(lambda: (lambda c: c.is_port_security_enabled is False and c.security_group_ids == []
                            and not c.allowed_address_pairs and not c.extra_dhcp_opts)(
            admin[one].network.get_port(port.id)), timeout=60, what="port security off in the copy")

        central.network.update_port(port.id, fixed_ips=[{"subnet_id": subnet.id, "ip_address": "10.77.0.50"}])
        eventually(lambda: [ip["ip_address"] for ip in admin[one].network.get_port(port.id).fixed_ips]
                   == ["10.77.0.50"], timeout=60, what="new fixed IP in the copy")
    finally:
        conn.compute.delete_server(server)
        conn.compute.wait_for_delete(server, wait=120)
        eventually(lambda: _delete_sg(central, sg2.id), timeout=60, what="delete of sg2")


def _delete_sg(conn, sg_id) -> bool:
    import openstack.exceptions as os_exc

    try:
        conn.network.delete_security_group(sg_id, ignore_missing=True)
        return True
    except os_exc.ConflictException:
        return False


def test_a_central_404_that_central_never_recorded_wipes_nothing(sandbox, admin):
    """Before: a network_sync whose central read answered 404 deleted every
    regional copy of the network, ports included. A network central never had
    (made in one region only) is the plainest such 404."""
    one = sandbox.regions[0]
    local = admin[one].network.create_network(name=f"regional-{uuid.uuid4().hex[:6]}")
    try:
        admin[one].network.create_subnet(network_id=local.id, ip_version=4, cidr="10.78.0.0/24")
        port = admin[one].network.create_port(network_id=local.id, name="must-survive")
        _enqueue(sandbox, "network_sync", local.id)
        job = eventually(lambda: _finished(sandbox, "network_sync", local.id), timeout=60, what="the sync job")
        assert job.status == "FAIL" and "recorded no delete" in job.last_error
        assert _network_or_none(admin[one], local.id) is not None
        assert _port_or_none(admin[one], port.id) is not None
    finally:
        for p in admin[one].network.ports(network_id=local.id):
            admin[one].network.delete_port(p)
        admin[one].network.delete_network(local.id)


def test_a_group_shared_from_another_project_is_not_taken_for_deleted(sandbox, central, admin, stretched):
    net, _ = stretched
    one = sandbox.regions[0]
    shared = admin[CENTRAL].network.create_security_group(name=f"{net.name}-shared")
    try:
        admin[CENTRAL].network.create_rbac_policy(object_type="security_group", object_id=shared.id,
                                                  action="access_as_shared", target_project_id=central.current_project_id)
        port = central.network.create_port(network_id=net.id, name=f"{net.name}-p", security_group_ids=[shared.id])
        conn = sandbox.connect(one)
        server = conn.compute.wait_for_server(boot(conn, net.name, port_id=port.id), wait=240)
        assert admin[one].network.get_security_group(shared.id) is not None
        project = central.current_project_id
        _enqueue(sandbox, "security_group_sync", project)
        job = eventually(lambda: _finished(sandbox, "security_group_sync", project), timeout=90, what="group sync")
        assert job.status == "SUCCESS", job.last_error
        assert admin[one].network.get_security_group(shared.id).id == shared.id
        conn.compute.delete_server(server)
        conn.compute.wait_for_delete(server, wait=120)
    finally:
        for p in central.network.ports(network_id=net.id, name=f"{net.name}-p"):
            central.network.delete_port(p)
        eventually(lambda: _delete_sg(admin[CENTRAL], shared.id), timeout=60, what="delete of the shared group")
